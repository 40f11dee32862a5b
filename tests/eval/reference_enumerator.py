"""A reference implementation of the published path semantics, written plainly from the spec for the tests.

It enumerates every legal path (exponential, fine for small DAGs) and runs the published live loop over the
enumerated path list, so the non-enumerating matcher can be compared against it.
"""

from __future__ import annotations

from itertools import combinations

ASK = "ask_user_for_required_parameters"
ANSWER = "prepare_to_answer"


def enumerate_paths(names: list[str], deps: list[list[int]]) -> list[list[list[int]]]:
    """All legal step sequences, in the published DFS order."""
    n = len(names)
    paths: list[list[list[int]]] = []

    def frontier(visited: set[int]) -> list[int]:
        return [i for i in range(n) if i not in visited and all(d in visited for d in deps[i])]

    def rec(visited: set[int], path: list[list[int]]) -> None:
        if len(visited) == n:
            paths.append([list(step) for step in path])
            return
        front = frontier(visited)
        # consecutive same-name groups of the frontier
        groups: list[list[int]] = []
        for node in front:
            if groups and names[groups[-1][-1]] == names[node]:
                groups[-1].append(node)
            else:
                groups.append([node])
        partial_runs: set[tuple[int, ...]] = set()
        whole_runs: list[tuple[int, ...]] = []
        for g in groups:
            if len(g) > 1:
                for r in range(1, len(g)):
                    partial_runs.update(combinations(g, r))
                whole_runs.append(tuple(g))
        seen_names: set[str] = set()
        candidates: list[tuple[int, ...]] = []
        for r in range(1, len(front) + 1):
            for comb in combinations(front, r):
                key = "|".join(names[c] for c in comb)
                if key not in seen_names:
                    seen_names.add(key)
                    candidates.append(comb)
        for comb in candidates:
            if len(comb) > 1:
                prefixes = [comb[: i + 1] for i in range(len(comb))]
                dropped = any(p in partial_runs for p in prefixes)
                if any(p in whole_runs for p in prefixes):
                    dropped = False
                if dropped:
                    continue
            steps: list[list[int]] = [list(comb)]
            if len(comb) == 1:
                for run in whole_runs:
                    if run[0] == comb[0]:
                        steps = [[x] for x in run]
                        comb = run
                        break
            rec(visited | set(comb), path + steps)

    rec(set(), [])
    return paths


def run_published_loop(
    names: list[str], deps: list[list[int]], replies: list[tuple[str, list[str]]]
) -> tuple[str, list[tuple[str, list[int] | None]]]:
    """The published live loop over the enumerated paths, names only.

    ``replies`` holds ``("text", [])`` or ``("calls", [names...])`` per step. Returns the final label and, per
    step, ``("ok", idx_list)`` or ``("error: <reason>", None)``.
    """
    n = len(names)
    all_paths = enumerate_paths(names, deps)
    remaining = list(all_paths)
    log: list[tuple[str, list[int] | None]] = []
    for step, (kind, called) in enumerate([*replies, ("empty", [])] * 1):
        if kind == "empty":
            log.append(("error: empty", None))
            return "error", log
        cands = [p[step] for p in remaining if len(p) > step]
        if kind == "text":
            if step >= n:
                log.append(("error: text after end", None))
                return "error", log
            for cand in cands:
                cand_names = [names[i] for i in cand]
                if ASK in cand_names:
                    log.append(("ok", cand))
                    break
                if ANSWER in cand_names:
                    log.append(("ok", cand))
                    return "correct", log
            else:
                log.append(("error: not candidate", None))
                return "error", log
            continue
        if step >= n:
            log.append(("error: idx none", None))
            return "error", log
        wanted = sorted(called)
        for cand in cands:
            if sorted(names[i] for i in cand) == wanted:
                remaining = [p for p in remaining if len(p) > step and p[step] == cand]
                log.append(("ok", cand))
                break
        else:
            log.append(("error: not candidate", None))
            return "error", log
    log.append(("error: empty", None))
    return "error", log
