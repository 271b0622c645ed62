"""Screenshots of every dashboard page, for the README (docs/screenshots/*.png).

Against a running server with the demo history (``benchwatch demo``, then ``benchwatch
serve``), in headless Chromium (the run page is best shown with a run of the built-in suite,
which has hardware and kernel figures: ``--pages run --run-id N`` against that server). The
revision page needs the demo's bad nightly (``--revision``: the torch git sha its alerts page
links to); the bulk triage page a token with the ``triage`` scope to sign in with
(``--token``):

    .venv/bin/python docs/screenshots.py [--server http://127.0.0.1:8000] [--pages ...]
"""

import argparse
from pathlib import Path

from playwright.sync_api import sync_playwright

PAGES = {
    "overview": "/?machine=demo-h100&channel=nightly",
    "series": "/series?machine=demo-h100&channel=nightly&model=bert&precision=bf16&metric=latency",
    "compare-configs": "/compare?kind=configs&machine=demo-h100&new_config=dynamic",
    "compare-machines": "/compare?kind=machines&machine=demo-h100&new_machine=demo-mi300x",
    "compare-channels": "/compare?kind=channels&machine=demo-h100",
    "alerts": "/alerts?machine=demo-h100",
    "newly-failing": "/?machine=demo-mi300x&channel=nightly",
    "alerts-failures": "/alerts?machine=demo-mi300x&direction=failure",
    "run": "/runs/{run_id}",
    "compare-sure": "/compare?kind=runs&machine=demo-h100&base_run=981&new_run=987",
    "revision": "/revisions/{revision}",
    "quality": "/quality?weeks=12",
    "alerts-bulk": "/alerts?machine=demo-h100&status=any",
}
SIGNED_IN = {"alerts-bulk"}  # shown as a triager sees them
OUT = Path(__file__).parent / "screenshots"


def main() -> None:
    """Open each page at 1280 px and save a full-page PNG."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--server", default="http://127.0.0.1:8000")
    parser.add_argument("--chromium", default="/usr/bin/chromium")
    parser.add_argument("--run-id", type=int, default=1, help="the run page to show")
    parser.add_argument("--revision", default="", help="the revision page's commit or sha")
    parser.add_argument("--token", default="", help="a triage token, for the signed-in pages")
    parser.add_argument("--pages", nargs="*", default=list(PAGES), choices=list(PAGES))
    args = parser.parse_args()
    OUT.mkdir(exist_ok=True)
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(
            executable_path=args.chromium, headless=True, args=["--no-sandbox", "--disable-gpu"]
        )
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        for name in sorted(args.pages, key=lambda name: name in SIGNED_IN):  # sign in last
            if name in SIGNED_IN and args.token:
                page.goto(args.server + "/login")
                page.get_by_label("API token").fill(args.token)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_load_state("networkidle")
            page.goto(args.server + PAGES[name].format(run_id=args.run_id, revision=args.revision))
            page.wait_for_load_state("networkidle")
            page.screenshot(path=OUT / f"{name}.png", full_page=False)
            print(f"{name}: {OUT / f'{name}.png'}")
        browser.close()


if __name__ == "__main__":
    main()
