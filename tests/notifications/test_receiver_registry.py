"""A receiver kind is one declaration (issue 27 point 7): its module's ``KIND``, registered once.

The schema's union, the read's ``kind``, delivery's senders, the key, display, masking and
check of a receiver all come from ``receivers.registry``: these tests fail when a kind is
declared but not registered, when the registry and the schema disagree, or when a registered
kind does not go through the schema, the credentials, masking and display as its kind says.
"""

import importlib
import pkgutil
import subprocess
import sys
from typing import Any, Literal

import pytest
from pydantic import TypeAdapter, ValidationError

from app.core.errors import InvalidInput
from app.notifications import delivery, receivers, service, targets
from app.notifications.guard import AllowList
from app.notifications.message import Message
from app.notifications.receivers import Outcome, SendContext
from app.notifications.receivers.base import ReceiverBase, ReceiverKind
from app.notifications.receivers.registry import BY_NAME, REGISTERED
from app.notifications.schemas import ReceiverRead, SubscriptionCreate, receiver_union

# One receiver of each kind, as an author gives it, and how every read and the log show it.
SAMPLES: dict[str, tuple[dict[str, Any], str, dict[str, Any]]] = {
    "webhook": (
        {"kind": "webhook", "url": "https://hooks.example:8443/bw/secret-path?k=1"},
        "https://hooks.example:8443/…",
        {"url": "https://hooks.example:8443/…"},
    ),
    "email": (
        {"kind": "email", "to": ["b@team.example", "a@team.example"]},
        "a@team.example,b@team.example",
        {"to": ["b@team.example", "a@team.example"]},
    ),
    "slack": (
        {"kind": "slack", "url": "https://hooks.slack.com/services/T0/B0/XYZ"},
        "https://hooks.slack.com/…",
        {"url": "https://hooks.slack.com/…"},
    ),
    "apprise": (
        {"kind": "apprise", "url": "mmost://chat.example/token123"},
        "mmost://chat.example/…",
        {"url": "mmost://…"},
    ),
    "github_issue": (
        {"kind": "github_issue", "repository": "pytorch/benchmark", "labels": ["perf"]},
        "pytorch/benchmark",
        {"repository": "pytorch/benchmark", "labels": ["perf"]},
    ),
    "feed": ({"kind": "feed"}, "Atom feed", {}),
}


def declared() -> dict[str, ReceiverKind]:
    """Every ``KIND`` a module of the receivers package declares, by its module."""
    found = {}
    for module in pkgutil.iter_modules(receivers.__path__):
        imported = importlib.import_module(f"{receivers.__name__}.{module.name}")
        if isinstance(kind := getattr(imported, "KIND", None), ReceiverKind):
            found[module.name] = kind
    return found


def test_every_declared_kind_is_registered_once() -> None:
    kinds = declared()
    assert len(kinds) == 6  # the check sees the declarations
    unregistered = [module for module, kind in kinds.items() if kind not in REGISTERED]
    assert unregistered == []
    assert len(BY_NAME) == len(REGISTERED), "two registered kinds share a name"
    assert set(REGISTERED) == set(kinds.values()), "a registered kind no module declares"


def test_the_schema_and_the_read_list_the_registered_kinds_in_order() -> None:
    names = list(BY_NAME)
    items = SubscriptionCreate.model_json_schema()["properties"]["receivers"]["items"]
    shapes = [kind.schema.__name__ for kind in REGISTERED]
    assert [member["$ref"].rsplit("/", 1)[1] for member in items["oneOf"]] == shapes
    mapping = {
        name: ref.rsplit("/", 1)[1] for name, ref in items["discriminator"]["mapping"].items()
    }
    assert mapping == dict(zip(names, shapes, strict=True))
    assert ReceiverRead.model_json_schema()["properties"]["kind"]["enum"] == names
    assert all(delivery.sender(name) is BY_NAME[name].send for name in names)


def test_a_kind_whose_shape_says_another_kind_is_refused() -> None:
    class Odd(ReceiverBase):
        kind: Literal["odd"]

    with pytest.raises(TypeError, match=r"Odd.kind must be Literal\['even'\]"):
        ReceiverKind("even", Odd, BY_NAME["feed"].send)


def _no_send(receiver: Any, message: Message, context: SendContext) -> Outcome:
    return Outcome(ok=True)


def test_a_new_kind_is_one_more_member_of_the_union() -> None:
    """The union is built from the kinds given: a kind declared here (not registered, so no
    global changes) is taken, told apart by its ``kind``, and held to its own shape."""

    class Pager(ReceiverBase):
        kind: Literal["pager"]
        number: str

    union = TypeAdapter(list[receiver_union((*REGISTERED, ReceiverKind("pager", Pager, _no_send)))])
    taken = union.validate_python([{"kind": "pager", "number": "7"}, SAMPLES["email"][0]])
    assert [type(r).__name__ for r in taken] == ["Pager", "EmailReceiver"]
    with pytest.raises(ValidationError, match=r"0\.pager\.number"):
        union.validate_python([{"kind": "pager"}])
    with pytest.raises(ValidationError, match="union_tag_invalid"):
        TypeAdapter(list[receiver_union(REGISTERED)]).validate_python([{"kind": "pager"}])


def test_the_defaults_are_those_of_a_url_that_is_its_credential() -> None:
    """A kind that declares no hook is shown by its URL's host and its URL guarded."""

    class Hook(ReceiverBase):
        kind: Literal["hook"]
        url: str

    kind = ReceiverKind("hook", Hook, _no_send)
    receiver = {"kind": "hook", "url": "https://hooks.example/token/abc"}
    assert kind.where(receiver) == "https://hooks.example/token/abc"
    assert kind.target(receiver) == "https://hooks.example/…"
    assert kind.masked(receiver) == {"kind": "hook", "url": "https://hooks.example/…"}
    with pytest.raises(ValueError, match="loopback"):
        kind.check({"kind": "hook", "url": "http://127.0.0.1/x"}, AllowList(), "")
    with pytest.raises(KeyError):  # a kind without a URL must say where it sends
        kind.check({"kind": "hook"}, AllowList(), "")


@pytest.mark.parametrize("name", list(BY_NAME))
def test_every_registered_kind_round_trips(name: str) -> None:
    """Through the schema, the credentials made for it, masking, its read, key and target."""
    assert set(SAMPLES) == set(BY_NAME), "a registered kind without its sample here"
    given, target, shown = SAMPLES[name]
    body = {"name": "s", "receivers": [given]}
    (stored,) = SubscriptionCreate.model_validate(body).model_dump(mode="json")["receivers"]
    assert type(SubscriptionCreate.model_validate(body).receivers[0]) is BY_NAME[name].schema
    (filled,) = targets.with_credentials([stored])
    (masked,) = targets.answered([filled])
    expected = {"disabled": False, "disabled_reason": "", **given, **shown}
    assert {k: v for k, v in masked.items() if k != "secrets"} == {
        k: v for k, v in expected.items() if k != "secrets"
    }
    assert ReceiverRead.model_validate(masked).kind == name
    assert targets.receiver_target(filled) == target
    assert targets.receiver_key(filled).startswith(f"{name}:")
    # A changed secret or label is the same receiver; a receiver sent elsewhere is not.
    assert targets.receiver_key({**filled, "labels": [], "secrets": []}) == targets.receiver_key(
        filled
    )
    if name == "webhook":
        assert [s[-4:] for s in masked["secrets"]] == [s[-4:] for s in filled["secrets"]]
        assert masked["secrets"][0].startswith("whsec_…")
    if name == "feed":
        assert filled["token"]
        assert "token" not in masked
    # What the API answers is what its schema says: the masked form is read back as given.
    if "url" in given:
        (again,) = targets.with_credentials([masked], [filled])
        assert again["url"] == filled["url"]


def test_each_kind_checks_where_it_sends() -> None:
    """Webhook and Slack URLs pass the SSRF guard, Apprise URLs their scheme list and guard."""
    check = service.check_receivers("", "mmost")
    refused = {
        "webhook": {"kind": "webhook", "url": "http://127.0.0.1:9/x"},
        "slack": {"kind": "slack", "url": "http://10.0.0.1/services/x"},
        "apprise": {"kind": "apprise", "url": "discord://1/token"},
    }
    for name, receiver in refused.items():
        with pytest.raises(InvalidInput, match="a receiver sends where it may not") as caught:
            check([SAMPLES["email"][0], receiver])
        assert [e["loc"] for e in caught.value.errors] == ["receivers[1].url"], name
    check([SAMPLES[name][0] for name in ("email", "github_issue", "feed")])


def test_the_api_process_loads_no_sender_library() -> None:
    """The registry imports every kind's module: Apprise must still load in a worker only."""
    code = "import sys, app.main, app.notifications.delivery;sys.exit('apprise' in sys.modules)"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)
