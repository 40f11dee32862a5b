"""A small library service simulated by a scripted model: an `llm` environment whose tools declare the entities
they take and give (book, member, loan), for generation tests that need a model-backed environment."""

from __future__ import annotations

import json
import re

from toolwild.core.environment import BackendKind, Environment
from toolwild.core.tool import Effect, Tool
from toolwild.llm.types import ChatRequest


def _obj(props: dict, required: list[str]) -> dict:
    return {"type": "object", "properties": props, "required": required}


_S = {"type": "string"}
TOOLS = [
    Tool(
        name="find_member",
        description="Look a library member up by name.",
        parameters=_obj({"name": _S}, ["name"]),
        returns=_obj({"member_id": _S, "name": _S}, ["member_id"]),
        effect=Effect.READ,
        produces=["member_id"],
    ),
    Tool(
        name="list_books",
        description="All books of the library with their ids.",
        parameters=_obj({}, []),
        returns={"type": "array", "items": _obj({"book_id": _S, "title": _S}, ["book_id"])},
        effect=Effect.READ,
        produces=["book_id"],
    ),
    Tool(
        name="get_book",
        description="Details of one book: title and whether it is on the shelf.",
        parameters=_obj({"book_id": _S}, ["book_id"]),
        returns=_obj({"book_id": _S, "title": _S, "available": {"type": "boolean"}}, ["book_id"]),
        effect=Effect.READ,
        consumes=["book_id"],
        produces=["book_id"],
    ),
    Tool(
        name="lend_book",
        description="Lend a book to a member for three weeks.",
        parameters=_obj({"book_id": _S, "member_id": _S}, ["book_id", "member_id"]),
        returns=_obj({"loan_id": _S, "book_id": _S, "member_id": _S}, ["loan_id"]),
        effect=Effect.WRITE,
        consumes=["book_id", "member_id"],
        produces=["loan_id"],
    ),
]
LIBRARY = Environment(
    id="library",
    description="A small lending library.",
    field="libraries",
    subdomain="lending",
    tools=TOOLS,
    initial_state={
        "books": [
            {"book_id": "B-101", "title": "Dune", "available": True},
            {"book_id": "B-102", "title": "Emma", "available": True},
            {"book_id": "B-103", "title": "Ulysses", "available": True},
        ],
        "members": [{"member_id": "M-7", "name": "Ada Lovelace"}, {"member_id": "M-8", "name": "Alan Turing"}],
        "loans": [],
    },
    backend=BackendKind.LLM,
)


def prompt_value(request: ChatRequest, label: str) -> object:
    """A JSON value the simulator put in its prompt after ``label: `` (``Current state``, ``Call`` ...)."""
    text = request.messages[-1]["content"]
    match = re.search(rf"^{label}: (.*)$", text, flags=re.M)
    assert match, f"no {label!r} line in the simulator prompt"
    return json.loads(match.group(1))


def call_of(request: ChatRequest) -> dict:
    """The call a simulator prompt asks about (name and arguments)."""
    call = prompt_value(request, "Call")
    assert isinstance(call, dict)
    return call


def library_model(request: ChatRequest) -> str:
    """A faithful simulator: answers from the state in the prompt; a lend appends a loan and shelves the book."""
    state = prompt_value(request, "Current state")
    call = prompt_value(request, "Call")
    name, args = call["name"], call["arguments"]
    if name == "list_books":
        return json.dumps({"result": [{"book_id": b["book_id"], "title": b["title"]} for b in state["books"]]})
    if name == "find_member":
        hit = [m for m in state["members"] if m["name"].lower() == args["name"].lower()]
        return json.dumps({"result": hit[0] if hit else {"member_id": "", "name": args["name"]}})
    if name == "get_book":
        hit = [b for b in state["books"] if b["book_id"] == args["book_id"]]
        return json.dumps({"result": hit[0] if hit else {"book_id": args["book_id"], "title": "", "available": False}})
    index = (
        next(i for i, b in enumerate(state["books"]) if b["book_id"] == args["book_id"])
        if any(b["book_id"] == args["book_id"] for b in state["books"])
        else None
    )
    loan = {"loan_id": f"L-{len(state['loans']) + 1}", "book_id": args["book_id"], "member_id": args["member_id"]}
    patch = [{"op": "add", "path": "/loans/-", "value": loan}]
    if index is not None:
        patch.append({"op": "replace", "path": f"/books/{index}/available", "value": False})
    return json.dumps({"result": loan, "patch": patch})
