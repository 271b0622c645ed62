// benchwatch dashboard: draws the Plotly figures a page embeds, sorts tables, and sends
// triage actions to the API. No build step; plotly.js is served by the app itself.
"use strict";

function drawFigures() {
  document.querySelectorAll("[data-figure]").forEach((element) => {
    const source = document.getElementById(element.dataset.figure);
    if (!source || typeof Plotly === "undefined") return;
    const figure = JSON.parse(source.textContent);
    const config = { responsive: true, displaylogo: false };
    Plotly.newPlot(element, figure.data, figure.layout, config);
  });
}

function sortableTables() {
  document.querySelectorAll("table[data-sortable] th[data-key]").forEach((header) => {
    const button = document.createElement("button");
    button.type = "button";
    button.className = "sort";
    button.textContent = header.textContent;
    header.textContent = "";
    header.appendChild(button);
    button.addEventListener("click", () => sortBy(header));
  });
}

function sortBy(header) {
  const table = header.closest("table");
  const index = Array.from(header.parentElement.children).indexOf(header);
  const descending = header.getAttribute("aria-sort") !== "descending";
  table.querySelectorAll("th[aria-sort]").forEach((h) => h.removeAttribute("aria-sort"));
  header.setAttribute("aria-sort", descending ? "descending" : "ascending");
  const body = table.tBodies[0];
  const key = (row) => {
    const cell = row.children[index];
    const value = cell.dataset.value ?? cell.textContent.trim();
    const number = parseFloat(value);
    return Number.isNaN(number) ? value : number;
  };
  const rows = Array.from(body.rows);
  rows.sort((a, b) => {
    const x = key(a), y = key(b);
    const order = typeof x === "number" && typeof y === "number" ? x - y : String(x).localeCompare(String(y));
    return descending ? -order : order;
  });
  rows.forEach((row) => body.appendChild(row));
}

// Triage rides on the sign-in session: the browser sends its HttpOnly cookie, the page adds the
// CSRF value the server put in it. No token ever reaches page scripts or storage.
function csrfToken() {
  const meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.content : null;
}

const LINKED = ["duplicate", "downstream"];  // statuses that name another alert group

// Send a triage request through the sign-in session; the status line says how it went, and
// the page reloads once it is saved. ``said`` words the answer of a saved request.
async function sendJSON(method, url, body, status, said) {
  const csrf = csrfToken();
  if (!csrf) {
    status.textContent = "Sign in with a triage token first: nothing was changed.";
    return;
  }
  status.textContent = "Saving…";
  const response = await fetch(url, {
    method,
    credentials: "same-origin",
    headers: { "Content-Type": "application/json", "X-CSRF-Token": csrf },
    body: JSON.stringify(body),
  });
  const answer = await response.json().catch(() => ({}));
  if (response.ok) {
    status.textContent = said(answer);
    window.location.reload();
    return;
  }
  const message = typeof answer.detail === "string" ? answer.detail : response.statusText;
  status.textContent = `Not saved (${response.status}): ${message}`;
}

async function sendTriage(form) {
  const body = {};
  new FormData(form).forEach((value, name) => { if (value !== "") body[name] = value; });
  if (!LINKED.includes(body.status)) delete body.related_group_id;  // only those name a group
  await sendJSON("PATCH", form.dataset.endpoint, body, form.querySelector(".status-line"), () => "Saved.");
}

function triageForms() {
  document.querySelectorAll("form[data-endpoint]").forEach((form) => {
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      const clicked = event.submitter;
      if (clicked && clicked.name === "status") {
        let hidden = form.querySelector("input[type=hidden][name=status]");
        if (!hidden) {
          hidden = document.createElement("input");
          hidden.type = "hidden";
          hidden.name = "status";
          form.appendChild(hidden);
        }
        hidden.value = clicked.value;
      }
      sendTriage(form);
    });
  });
}

// Bulk triage: the checked findings of the page, one request for all (POST /api/v1/triage).
function bulkTriage() {
  const form = document.getElementById("bulk-triage");
  if (!form) return;
  const boxes = () => Array.from(document.querySelectorAll("input[data-bulk]"));
  const count = form.querySelector(".bulk-count");
  const recount = () => { count.textContent = `${boxes().filter((b) => b.checked).length} selected`; };
  boxes().forEach((box) => box.addEventListener("change", recount));
  document.getElementById("select-all").addEventListener("change", (event) => {
    boxes().filter((b) => b.dataset.bulk === "groups").forEach((b) => { b.checked = event.target.checked; });
    recount();
  });
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const ids = {};
    boxes().filter((b) => b.checked).forEach((b) => {
      (ids[b.dataset.bulk] = ids[b.dataset.bulk] || []).push(Number(b.value));
    });
    const update = {};
    new FormData(form).forEach((value, name) => { if (value !== "") update[name] = value; });
    const status = form.querySelector(".status-line");
    await sendJSON("POST", form.dataset.bulkEndpoint, { ids, update }, status, (answer) => `Saved ${answer.count} finding(s).`);
  });
}

document.addEventListener("DOMContentLoaded", () => {
  localStorage.removeItem("benchwatch.triageToken");  // where older versions kept a raw token
  drawFigures();
  sortableTables();
  triageForms();
  bulkTriage();
});
