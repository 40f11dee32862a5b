"""A deterministic "realistic" generator model: valid replies for every synthesis stage, derived from the request only.

For tests, benchmarks and dry runs of the generation pipeline without a model::

    llm = LLM(ScriptedBackend(stage_responder, delay_s=0.2))        # in-process, 200 ms per call
    FakeOpenAI(lambda body: Reply(text=stage_responder(request_from_openai_body(body))))  # over HTTP

Each stage is recognised from the request (the structured-output schema's title, else its shape, and the prompt):
subdomain lists, task families, tool drafts (and their repairs), seed data, the simulator's precondition verdicts and
tool results (:mod:`toolwild.envs.simulated`), audit judgements (:mod:`toolwild.synth.audit`) and user utterances
(:func:`toolwild.synth.utterances.write_utterance`). Every reply is a pure function of the request text: no counter,
no random stream, so replies do not depend on call order or concurrency, and a cached re-run is identical.

What it makes, on purpose, so that the pipeline's every path runs:

- tools whose names are distinct within a field (entity + family kind), with valid field specs, contracts, effects,
  and consumes/produces drawn from the subdomain's entity types (which get seed data), so the dependency check keeps
  them;
- in every family after the first, a shared helper tool repeated from the first family (a real model repeats
  itself): the exact dedup drops it;
- in about one family in four, a first tool without error modes: the contract check sends it to repair, and the
  repair reply fixes it;
- a judge that is honest (an error where an error was expected) but finds the edge-value answer of about one tool
  in six wrong, so the audit drops a few;
- a simulator that keeps state: a write that creates appends a record (and returns its new id), a write on an id
  replaces the record's matching fields; a call on an unknown id fails its precondition (``not_found``).
"""

from __future__ import annotations

import hashlib
import json
import re
from typing import Any

from toolwild.core.schema import example_value, normalize_schema
from toolwild.llm.types import ChatRequest

__all__ = ["request_from_openai_body", "stage_responder"]

_AREAS = (
    "Accounts",
    "Scheduling",
    "Records",
    "Billing",
    "Inventory",
    "Support",
    "Compliance",
    "Reporting",
    "Payments",
    "Logistics",
    "Enrollment",
    "Claims",
)
_ENTITIES = (
    "account",
    "invoice",
    "payment",
    "customer",
    "order",
    "appointment",
    "patient",
    "claim",
    "policy",
    "shipment",
    "ticket",
    "booking",
    "device",
    "contract",
    "vendor",
    "employee",
    "course",
    "student",
    "listing",
    "reservation",
    "asset",
    "project",
    "task",
    "report",
    "document",
    "member",
    "vehicle",
    "route",
    "product",
    "warehouse",
    "loan",
    "transaction",
    "case",
    "prescription",
    "provider",
    "lead",
    "campaign",
    "subscription",
    "license",
    "permit",
)
_KINDS = ("Lookup", "Intake", "Updates", "Reporting", "Cancellations", "Reviews", "Scheduling", "Transfers")
_TOKENS = {"cancellations": "cancels", "scheduling": "sched", "reporting": "reports", "transfers": "moves"}
"""Short name parts of the family kinds (a tool name is verb, entity and this)."""
_STAKEHOLDERS = ("customer", "operator", "manager", "auditor", "clerk", "partner")
_STATUSES = ["pending", "active", "closed"]
_CREATE_VERBS = ("create", "add", "register", "book", "open", "new", "submit")


def _h(*parts: Any) -> int:
    """A stable integer from the parts (never Python's salted ``hash``)."""
    return int(hashlib.sha256(json.dumps(parts).encode()).hexdigest()[:12], 16)


def _slug(text: str, limit: int = 12) -> str:
    return (re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_") or "item")[:limit].strip("_") or "item"


def request_from_openai_body(body: dict[str, Any]) -> ChatRequest:
    """The :class:`ChatRequest` behind an OpenAI chat-completions body (as the fake server receives it), so the
    same responder serves both the in-process backend and an HTTP server."""
    response_format = body.get("response_format") or {}
    schema = (response_format.get("json_schema") or {}).get("schema") if isinstance(response_format, dict) else None
    return ChatRequest(
        messages=body.get("messages") or [],
        response_format=schema,
        temperature=body.get("temperature") or 0.0,
        seed=body.get("seed"),
        max_tokens=body.get("max_tokens") or body.get("max_completion_tokens"),
    )


def stage_responder(request: ChatRequest) -> dict[str, Any] | str:
    """A valid reply to any synthesis stage's request (see the module docstring); JSON text for structured stages,
    a short text otherwise."""
    schema = request.response_format or {}
    title = schema.get("title")
    prompt = _first_user_text(request)
    if title in _STAGES:
        return json.dumps(_STAGES[title](prompt, schema), ensure_ascii=False)
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and "result" in properties and "Answer the call" in prompt:
        return json.dumps(_simulate(prompt, schema), ensure_ascii=False)
    if schema:
        return json.dumps(example_value(schema), ensure_ascii=False)
    return "OK."


def _first_user_text(request: ChatRequest) -> str:
    """The stage's own prompt (a retry appends the failed reply and a correction after it)."""
    for message in request.messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            return message["content"]
    return ""


def _line(prompt: str, label: str) -> str | None:
    """The rest of the line that starts with ``label`` (the simulator's and judge's prompts are such lines)."""
    match = re.search(rf"^{re.escape(label)} (.*)$", prompt, flags=re.M)
    return match.group(1) if match else None


def _json_line(prompt: str, label: str) -> Any:
    text = _line(prompt, label)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError:  # cut by the prompt's length bound
        return None


# ------------------------------------------------------------------------------------------------ generation
def _subdomains(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    match = re.search(r"^Field: (.*?)\.\nList (\d+) ", prompt, flags=re.M | re.S)
    field, count = (match.group(1), int(match.group(2))) if match else ("general", 2)
    base = _h("field", field)
    out = []
    for i in range(count):
        area = _AREAS[(base + i) % len(_AREAS)]
        entities = [_ENTITIES[(base + 2 * i + k) % len(_ENTITIES)] for k in range(2)]
        name = f"{field[:50].strip().title()} {area}"
        out.append(
            {
                "name": name,
                "description": f"Manages {entities[0]} and {entities[1]} records for {field[:40]} teams.",
                "stakeholders": [_STAKEHOLDERS[(base + i + k) % len(_STAKEHOLDERS)] for k in range(2)],
                "entities": entities,
            }
        )
    return {"subdomains": out}


def _families(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    match = re.search(r"Subdomain: (.*?) \(.*\)\.\nList (\d+) families", prompt, flags=re.S)
    subdomain, count = (match.group(1), int(match.group(2))) if match else ("service", 2)
    base = _h("families", subdomain)
    families = []
    for j in range(count):
        kind = _KINDS[(base + j) % len(_KINDS)]
        families.append(
            {"name": f"{kind} requests", "description": f"The user wants {kind.lower()} done in {subdomain[:60]}."}
        )
    return {"families": families}


def _field(name: str, kind: str, description: str, **extra: Any) -> dict[str, Any]:
    return {"name": name, "type": kind, "description": description, "items": "string", **extra}


def _draft(verb: str, entity: str, token: str, where: str, *, broken: bool = False) -> dict[str, Any]:
    """One tool draft from a template (verb) for an entity; ``token`` keeps names distinct across families."""
    ref = f"{entity}_id"
    status = _field("status", "string", f"Status of the {entity}.", enum=_STATUSES)
    amount = _field("amount", "number", "Amount in USD.", minimum=0, maximum=10000)
    identity = _field(ref, "string", f"Id of the {entity}.")
    templates: dict[str, dict[str, Any]] = {
        "create": {
            "parameters": [_field("name", "string", f"Name of the new {entity}."), amount],
            "returns": [identity, status],
            "effect": "write",
            "consumes": [],
            "produces": [entity],
            "pre": f"the caller may create {entity} records",
            "post": f"a new {entity} is stored as pending",
        },
        "get": {
            "parameters": [identity],
            "returns": [identity, status, {**amount, "required": False}],
            "effect": "read",
            "consumes": [entity],
            "produces": [],
            "pre": f"the {entity} exists",
            "post": "nothing changes",
        },
        "update": {
            "parameters": [identity, status],
            "returns": [identity, status],
            "effect": "write",
            "consumes": [entity],
            "produces": [],
            "pre": f"the {entity} exists",
            "post": f"the {entity} has the new status",
        },
        "list": {
            "parameters": [_field("limit", "integer", "Most records to return.", minimum=1, maximum=50)],
            "returns": [_field("count", "integer", "How many there are."), _field("ids", "array", "Their ids.")],
            "effect": "read",
            "consumes": [],
            "produces": [],
            "pre": "the caller may read the list",
            "post": "nothing changes",
        },
        "cancel": {
            "parameters": [identity, _field("reason", "string", "Why.", required=False)],
            "returns": [identity, status],
            "effect": "write",
            "consumes": [entity],
            "produces": [],
            "pre": f"the {entity} exists and is not closed",
            "post": f"the {entity} is closed",
        },
    }
    t = templates[verb]
    return {
        "name": f"{verb}_{entity}_{token}" if token else f"{verb}_{entity}_records",
        "description": f"{_PURPOSE[verb].format(entity=entity)} In {where}."[:120],
        "parameters": t["parameters"],
        "returns": t["returns"],
        "preconditions": [t["pre"]],
        "postconditions": [t["post"]],
        "error_modes": [] if broken else [f"not_found: no {entity} with that id", "rejected: invalid input"],
        "effect": t["effect"],
        "consumes": t["consumes"],
        "produces": t["produces"],
    }


_VERBS = ("create", "get", "update", "list", "cancel")
_PURPOSE = {
    "create": "Registers a new {entity} under a name, with an opening amount; it starts out pending.",
    "get": "Looks up one {entity} by its id and reports its state.",
    "update": "Moves an existing {entity} to another status.",
    "list": "Counts the {entity} entries on file and returns some of their ids.",
    "cancel": "Closes an open {entity}, noting why if given.",
}
"""What each verb's tool does, in its own words: template tools that differ only in the verb would sit at the
threshold of the semantic pass, where a rounding difference between CPUs decides a drop."""


def _tool_drafts(prompt: str, schema: dict[str, Any]) -> list[dict[str, Any]]:
    """The family's tool list, before any repair (a function of the request head only)."""
    match = re.search(r"Field: (.*?)\. Subdomain: (.*?) \(.*?Entity types: (.*?)\.\nTask family: (.*?): ", prompt, re.S)
    field, subdomain, types, family = match.groups() if match else ("general", "service", "record", "tasks")
    entities = [_slug(e) for e in types.split(",") if e.strip() and e.strip() != "any"] or ["record"]
    count_match = re.search(r"Design (\d+) API tools", prompt)
    count = int(count_match.group(1)) if count_match else 3
    kind = _slug(family.split()[0], 14)
    token = _TOKENS.get(kind, kind[:10])
    where = f"{subdomain[:50]} ({field[:30]})"
    broken = _h("repair", field, subdomain, family) % 4 == 0
    main = _h("entity", field, subdomain, family) % len(entities)
    other = entities[(main + 1) % len(entities)]
    # a creator and a reader of one entity first (a chain a session can use), then the other verbs
    plan = [("create", entities[main]), ("get", entities[main]), ("update", other), ("cancel", other)]
    drafts = []
    for n in range(count):
        if n == count - 1 and count >= 3:  # the helper every family of the subdomain gets: dedup keeps the first
            drafts.append(_draft("list", entities[0], "", where))
            continue
        verb, entity = plan[n] if n < len(plan) else (_VERBS[n % len(_VERBS)], entities[n % len(entities)])
        drafts.append(_draft(verb, entity, token, where, broken=broken and n == 0))
    return drafts


def _tools(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    drafts = _tool_drafts(prompt, schema)
    if "reply with the corrected tools only" not in prompt:
        return {"tools": drafts}
    listed = set(re.findall(r"^- ([a-z][a-z0-9_]*): ", prompt.split("corrected tools only", 1)[1], flags=re.M))
    fixed = []
    for draft in drafts:
        if draft["name"] in listed:
            if not draft["error_modes"]:
                draft["error_modes"] = ["not_found: no such record", "rejected: invalid input"]
            fixed.append(draft)
    return {"tools": fixed}


def _seed(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    entities = schema.get("properties", {}).get("entities", {}).get("properties", {})
    out: dict[str, list[dict[str, Any]]] = {}
    for entity, spec in entities.items():
        fields = spec.get("items", {}).get("properties", {})
        records = []
        for k in range(3):
            record_id = _record_id(entity, k)
            record: dict[str, Any] = {"id": record_id}
            for name, field_spec in fields.items():
                if name != "id":
                    record[name] = _seed_value(name, field_spec.get("type"), entity, k, record_id)
            records.append(record)
        out[entity] = records
    return {"entities": out}


def _record_id(entity: str, k: int) -> str:
    return f"{_slug(entity, 8).upper().replace('_', '')[:4] or 'REC'}-{101 + k}"


def _seed_value(name: str, kind: Any, entity: str, k: int, record_id: str) -> Any:
    if kind == "string":
        if name.endswith("_id"):
            return record_id if name == f"{_slug(entity, 40)}_id" else _record_id(name[:-3], k)
        if name == "status":
            return _STATUSES[k % len(_STATUSES)]
        return f"{entity} {name} {k + 1}"[:40]
    if kind == "integer":
        return k + 1
    if kind == "number":
        return 100.0 + 25 * k
    if kind == "boolean":
        return k % 2 == 0
    return None


# ------------------------------------------------------------------------------------------------ simulation
def _precondition(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    call = _json_line(prompt, "Call:") or {}
    state = _json_line(prompt, "Current state:")
    arguments = call.get("arguments") if isinstance(call, dict) else None
    if not isinstance(arguments, dict) or not isinstance(state, dict):
        return {"holds": True}
    for name, value in sorted(arguments.items()):
        if name.endswith("_id") and isinstance(value, str) and _find(state, name[:-3], value) is None:
            entity = name[:-3].replace("_", " ")
            return {"holds": False, "kind": "not_found", "message": f"no {entity} with id {value}"}
    return {"holds": True}


def _find(state: dict[str, Any], entity: str, record_id: str) -> tuple[str, int] | None:
    """Where a record with this id is: (entity list, index); the entity's own list first, then any list."""
    lists = [entity] if isinstance(state.get(entity), list) else []
    lists += sorted(k for k, v in state.items() if isinstance(v, list) and k != entity)
    for key in lists:
        for index, record in enumerate(state[key]):
            if isinstance(record, dict) and record.get("id") == record_id:
                return key, index
    return None


def _entity_of(name: str, arguments: dict[str, Any], state: dict[str, Any]) -> str | None:
    """The state list a call acts on: named by an ``<entity>_id`` argument, else by a word of the tool's name."""
    for arg in sorted(arguments):
        if arg.endswith("_id") and isinstance(state.get(arg[:-3]), list):
            return arg[:-3]
    words = name.split("_")
    for key in sorted(state, key=len, reverse=True):
        if isinstance(state[key], list) and (key in words or key in name):
            return key
    return None


def _simulate(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    """The tool's answer and, for a write, its patch: a create appends a record with a new id, a write on a known id
    replaces the fields it was given (a cancel closes the record); the result reads from the record as it ends."""
    call = _json_line(prompt, "Call:") or {}
    name = str(call.get("name", "")) if isinstance(call, dict) else ""
    arguments = call.get("arguments") if isinstance(call, dict) and isinstance(call.get("arguments"), dict) else {}
    state = _json_line(prompt, "Current state:")
    state = state if isinstance(state, dict) else {}
    writes = "patch" in schema.get("properties", {})
    entity = _entity_of(name, arguments, state)
    records = state.get(entity, []) if entity else []
    target = next((v for k, v in sorted(arguments.items()) if k.endswith("_id") and isinstance(v, str)), None)
    found = _find(state, entity, target) if entity is not None and target is not None else None
    record = dict(state[found[0]][found[1]]) if found is not None else {}
    patch: list[dict[str, Any]] = []
    new_id = None
    if writes and found is not None:
        patch = _update_ops(name, arguments, state, found)
        record.update({op["path"].rsplit("/", 1)[1]: op["value"] for op in patch})
    elif writes and entity is not None and target is None and name.split("_")[0] in _CREATE_VERBS:
        new_id = _record_id(entity, len(records))
        scalars = {k: v for k, v in sorted(arguments.items()) if isinstance(v, str | int | float | bool)}
        record = {"id": new_id, "status": "pending", **scalars}
        patch = [{"op": "add", "path": f"/{entity}/-", "value": record}]
    context = {"arguments": arguments, "entity": entity, "records": records, "record": record, "new_id": new_id}
    context["name"] = name
    result_schema = schema.get("properties", {}).get("result", {})
    reply: dict[str, Any] = {"result": _value(result_schema, "result", context)}
    if writes:
        reply["patch"] = patch
    return reply


def _update_ops(
    name: str, arguments: dict[str, Any], state: dict[str, Any], found: tuple[str, int]
) -> list[dict[str, Any]]:
    key, index = found
    record = state[key][index]
    ops = [
        {"op": "replace", "path": f"/{key}/{index}/{field}", "value": value}
        for field, value in sorted(arguments.items())
        if field in record and field != "id" and not field.endswith("_id")
    ]
    if name.startswith("cancel") and "status" in record and "status" not in arguments:
        ops.append({"op": "replace", "path": f"/{key}/{index}/status", "value": "closed"})
    return ops


def _value(schema: Any, name: str, context: dict[str, Any]) -> Any:
    """A value of ``schema`` for the field ``name``, consistent with the call where that makes sense."""
    schema = normalize_schema(schema) if isinstance(schema, dict) else {}
    kind = schema.get("type")
    kind = kind[0] if isinstance(kind, list) else kind
    arguments = context["arguments"]
    if kind == "object" or "properties" in schema:
        properties = schema.get("properties", {})
        return {key: _value(spec, key, context) for key, spec in properties.items()}
    if name in arguments and _fits(arguments[name], schema):
        return arguments[name]
    if name in context["record"] and _fits(context["record"][name], schema):
        return context["record"][name]
    if "enum" in schema:
        return schema["enum"][0]
    if kind == "string" and not schema.get("format") and not schema.get("pattern"):
        if name == "id" or name.endswith("_id"):
            return context["new_id"] or _record_id(name[:-3] or context["entity"] or "record", 0)
        text = f"{name.replace('_', ' ')} of {context['name'] or 'the call'}"
        return text[: int(schema.get("maxLength", 160))]
    if kind == "integer" and name in ("count", "total"):
        return len(context["records"])
    if kind == "array":
        items = schema.get("items", {})
        ids = [r.get("id") for r in context["records"] if isinstance(r, dict) and isinstance(r.get("id"), str)]
        if name.endswith("ids") and ids and _fits(ids[0], items):
            return ids[: int(schema.get("maxItems", 5))]
    return example_value(schema)


def _fits(value: Any, schema: dict[str, Any]) -> bool:
    kind = schema.get("type")
    if isinstance(value, bool):
        return kind == "boolean"
    checks = {"string": str, "integer": int, "number": int | float, "boolean": bool, "array": list, "object": dict}
    expected = checks.get(kind) if isinstance(kind, str) else None
    if expected is None or not isinstance(value, expected):
        return False
    return "enum" not in schema or value in schema["enum"]


def _judge(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    expected = _line(prompt, "Expected:") or ""
    response = _json_line(prompt, "Simulated response:")
    ok = isinstance(response, dict) and response.get("ok") is True
    tool = re.search(r'"name": ?"([^"]+)"', _line(prompt, "Tool:") or "")
    tool_name = tool.group(1) if tool else ""
    arguments = _json_line(prompt, "Call arguments:")
    references = isinstance(arguments, dict) and any(k.endswith("_id") for k in arguments)
    if expected.startswith("an invalid_arguments") and ok:
        return {"correct": False, "reason": "a result where the call should have failed"}
    if expected.startswith("a typed error") and ok and references:
        return {"correct": False, "reason": "a result where the call should have failed"}
    if expected.startswith("a sensible result") and _h("edge", tool_name) % 6 == 0:
        return {"correct": False, "reason": "the answer ignores the bound of the edge value"}
    return {"correct": True, "reason": "fits the contract and the output schema"}


def _utterance(prompt: str, schema: dict[str, Any]) -> dict[str, Any]:
    try:
        brief = json.loads(prompt)
    except ValueError:
        brief = {}
    example = brief.get("a correct example") if isinstance(brief, dict) else None
    return {"utterance": example if isinstance(example, str) and example else "Can you help me with this?"}


_STAGES = {
    "SubdomainList": _subdomains,
    "FamilyList": _families,
    "ToolDraftList": _tools,
    "SeedData": _seed,
    "PreconditionVerdict": _precondition,
    "JudgeVerdict": _judge,
    "_Utterance": _utterance,
}
