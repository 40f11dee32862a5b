"""Legal execution orders of a gold DAG, matched step by step without enumerating them.

WildToolBench judges a task by the sequence of *steps* (assistant turns) an agent takes: each step must be one of the
legal batches of the gold DAG at that point. The published scorer enumerates every legal path up front, which
explodes on wide DAGs (8 different-name parallel calls: 545,835 orders). Here a *position* (the set of visited nodes
plus any forced continuation of a same-name run) is advanced one step at a time, and the legal batches of a position
are generated lazily, in exactly the published order, so a step is matched by looking only at the batches whose
names could match.

Published batch rules (``wtb``), for the frontier F (unvisited nodes whose dependencies are visited, ascending idx):

1. candidates are the non-empty combinations of F, size-major then lexicographic, de-duplicated by the sequence of
   their names (the first one kept);
2. a *run* is a maximal group of consecutive frontier nodes with the same name; a batch of size > 1 that starts
   inside a run must start with the whole run;
3. a size-1 batch holding the first node of a run is expanded to the whole run, one node per step, in idx order.

``strict`` mode drops these quirks: any non-empty subset of the frontier is a legal batch, and which same-name nodes
a step takes is decided by the arguments (see :mod:`toolwild.eval.scoring.task`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import combinations

from toolwild.core.task import ANSWER_ACTION, ASK_ACTION, Task
from toolwild.core.verdict import ScoringMode

__all__ = ["Batch", "GoldDag", "Position"]


@dataclass(frozen=True, slots=True)
class Position:
    """Where an agent stands on a gold DAG.

    ``visited`` is a bit mask of nodes already scheduled; ``pending`` holds the remaining nodes of an expanded
    same-name run, which must be done one per step before anything else (published rule 3).
    """

    visited: int
    pending: tuple[int, ...] = ()


@dataclass(frozen=True, slots=True)
class Batch:
    """One legal step: the nodes it executes now, and the position it leads to."""

    nodes: tuple[int, ...]
    target: Position


class GoldDag:
    """The execution-order semantics of one task's gold DAG."""

    def __init__(
        self,
        names: Sequence[str],
        dependencies: Sequence[Sequence[int]],
        *,
        mode: ScoringMode = ScoringMode.WTB,
    ) -> None:
        self.names = list(names)
        self.n = len(self.names)
        self.mode = mode
        self._dep_mask = [0] * self.n
        self._children: list[list[int]] = [[] for _ in range(self.n)]
        for i, deps in enumerate(dependencies):
            for d in deps:
                self._dep_mask[i] |= 1 << d
                if i not in self._children[d]:
                    self._children[d].append(i)
        self.full = (1 << self.n) - 1
        self.start = Position(0)
        self._depth: list[int] | None = None

    @classmethod
    def from_task(cls, task: Task, *, mode: ScoringMode = ScoringMode.WTB) -> GoldDag:
        """Build from a task's gold nodes."""
        return cls([n.name for n in task.gold], [n.dependency_list for n in task.gold], mode=mode)

    # ----------------------------------------------------------------- positions
    def is_done(self, pos: Position) -> bool:
        """True when every node is scheduled and no forced step remains."""
        return pos.visited == self.full and not pos.pending

    def frontier(self, pos: Position) -> list[int]:
        """Unvisited nodes whose dependencies are all visited, ascending (ignores ``pending``)."""
        v = pos.visited
        return [i for i in range(self.n) if not (v >> i) & 1 and (self._dep_mask[i] & v) == self._dep_mask[i]]

    def _runs(self, frontier: list[int]) -> dict[int, tuple[int, ...]]:
        """Map each node of a same-name run (length > 1) to its run."""
        run_of: dict[int, tuple[int, ...]] = {}
        start = 0
        for k in range(1, len(frontier) + 1):
            if k == len(frontier) or self.names[frontier[k]] != self.names[frontier[start]]:
                if k - start > 1:
                    run = tuple(frontier[start:k])
                    for node in run:
                        run_of[node] = run
                start = k
        return run_of

    @staticmethod
    def _mask(nodes: Sequence[int]) -> int:
        m = 0
        for x in nodes:
            m |= 1 << x
        return m

    def _make_batch(self, pos: Position, comb: tuple[int, ...], run_of: dict[int, tuple[int, ...]]) -> Batch:
        if self.mode is ScoringMode.WTB and len(comb) == 1:
            run = run_of.get(comb[0])
            if run is not None and run[0] == comb[0]:
                return Batch((comb[0],), Position(pos.visited | self._mask(run), run[1:]))
        return Batch(comb, Position(pos.visited | self._mask(comb)))

    def _wtb_allowed(self, comb: tuple[int, ...], run_of: dict[int, tuple[int, ...]]) -> bool:
        """Published rule 2: a multi-node batch starting inside a run must start with the whole run."""
        if len(comb) == 1:
            return True
        run = run_of.get(comb[0])
        return run is None or comb[: len(run)] == run

    # ----------------------------------------------------------------- batches
    def batches(self, pos: Position) -> Iterator[Batch]:
        """Every legal step from ``pos``, lazily, in the published candidate order."""
        if pos.pending:
            yield Batch((pos.pending[0],), Position(pos.visited, pos.pending[1:]))
            return
        frontier = self.frontier(pos)
        if self.mode is ScoringMode.STRICT:
            for r in range(1, len(frontier) + 1):
                for comb in combinations(frontier, r):
                    yield Batch(comb, Position(pos.visited | self._mask(comb)))
            return
        run_of = self._runs(frontier)
        for r in range(1, len(frontier) + 1):
            seen: set[tuple[str, ...]] = set()
            for comb in combinations(frontier, r):
                key = tuple(self.names[c] for c in comb)
                if key in seen:
                    continue
                seen.add(key)
                if self._wtb_allowed(comb, run_of):
                    yield self._make_batch(pos, comb, run_of)

    def _combos_with_names(self, frontier: list[int], sorted_names: Sequence[str]) -> Iterator[tuple[int, ...]]:
        """Combinations of the frontier whose name multiset is ``sorted_names``, in lexicographic order.

        Only frontier nodes carrying one of the names take part, so the work is bounded by the same-name
        multiplicities, never by the frontier width.
        """
        need = Counter(sorted_names)
        pool = [x for x in frontier if self.names[x] in need]
        size = len(sorted_names)
        if size == 0 or any(sum(1 for x in pool if self.names[x] == nm) < k for nm, k in need.items()):
            return
        if all(k == sum(1 for x in pool if self.names[x] == nm) for nm, k in need.items()):
            yield tuple(pool)  # the only combination: every node of every needed name
            return
        for comb in combinations(pool, size):
            if Counter(self.names[c] for c in comb) == need:
                yield comb

    def find_batch(self, pos: Position, names: Sequence[str]) -> Batch | None:
        """The first legal step from ``pos`` whose (sorted) names equal the sorted ``names``, or None.

        This is the published matching rule ("the sorted multiset of called names must equal the sorted names of
        some legal next batch", first candidate in order wins) computed without enumerating the candidates.
        """
        wanted = sorted(names)
        if pos.pending:
            node = pos.pending[0]
            return Batch((node,), Position(pos.visited, pos.pending[1:])) if wanted == [self.names[node]] else None
        frontier = self.frontier(pos)
        run_of = self._runs(frontier) if self.mode is ScoringMode.WTB else {}
        seen: set[tuple[str, ...]] = set()
        for comb in self._combos_with_names(frontier, wanted):
            if self.mode is ScoringMode.WTB:
                key = tuple(self.names[c] for c in comb)
                if key in seen:
                    continue
                seen.add(key)
                if not self._wtb_allowed(comb, run_of):
                    continue
            return self._make_batch(pos, comb, run_of)
        return None

    def batch_with_nodes(self, pos: Position, nodes: Sequence[int]) -> Batch | None:
        """The legal step from ``pos`` that executes exactly ``nodes`` now, or None if there is none."""
        nodes_t = tuple(sorted(nodes))
        if pos.pending:
            return self.find_batch(pos, [self.names[nodes_t[0]]]) if nodes_t == (pos.pending[0],) else None
        frontier = self.frontier(pos)
        if not set(nodes_t) <= set(frontier):
            return None
        if self.mode is ScoringMode.STRICT:
            return Batch(nodes_t, Position(pos.visited | self._mask(nodes_t)))
        run_of = self._runs(frontier)
        key = tuple(self.names[c] for c in nodes_t)
        for comb in self._combos_with_names(frontier, sorted(key)):
            if tuple(self.names[c] for c in comb) == key:
                # the first combination with this name sequence is the one kept by de-duplication
                if comb != nodes_t or not self._wtb_allowed(comb, run_of):
                    return None
                return self._make_batch(pos, comb, run_of)
        return None

    def first_pseudo(self, pos: Position) -> int | None:
        """The first candidate step (in published order) that holds an ask or answer node; returns that node.

        Within a position, size-1 candidates come first and every frontier node is (the head of) a size-1
        candidate or shares its name with an earlier one, so this is the first such node of the frontier.
        """
        pool = [pos.pending[0]] if pos.pending else self.frontier(pos)
        for x in pool:
            if self.names[x] in (ASK_ACTION, ANSWER_ACTION):
                return x
        return None

    # ----------------------------------------------------------------- lengths
    def _depths(self) -> list[int]:
        """Length in nodes of the longest chain ending at each node."""
        if self._depth is None:
            depth = [0] * self.n
            order = self._topological()
            for i in order:
                depth[i] = 1 + max((depth[d] for d in range(self.n) if (self._dep_mask[i] >> d) & 1), default=0)
            self._depth = depth
        return self._depth

    def _topological(self) -> list[int]:
        indeg = [bin(m).count("1") for m in self._dep_mask]
        ready = [i for i in range(self.n) if indeg[i] == 0]
        order: list[int] = []
        while ready:
            i = ready.pop(0)
            order.append(i)
            for c in self._children[i]:
                indeg[c] -= 1
                if indeg[c] == 0:
                    ready.append(c)
        return order

    def remaining_length(self, pos: Position) -> int:
        """Fewest steps still needed from ``pos``: forced run steps, then the longest chain of unvisited nodes."""
        best: dict[int, int] = {}
        longest = 0
        for i in self._topological():
            if (pos.visited >> i) & 1:
                continue
            chain = 1 + max((best[d] for d in range(self.n) if (self._dep_mask[i] >> d) & 1 and d in best), default=0)
            best[i] = chain
            longest = max(longest, chain)
        return len(pos.pending) + longest

    @property
    def min_length(self) -> int:
        """Fewest steps over all legal paths.

        Taking the whole frontier at every step is always legal (it is the unique largest combination and starts
        with a whole run whenever it starts inside one), and no path can beat the longest dependency chain, so the
        minimum is that chain's length. The property test against the published enumerator checks this.
        """
        return max(self._depths(), default=0)

    def count_paths(self, pos: Position | None = None) -> int:
        """Number of legal paths from ``pos`` (default: the start), by memoised counting over positions."""
        memo: dict[Position, int] = {}

        def count(p: Position) -> int:
            if self.is_done(p):
                return 1
            if p not in memo:
                memo[p] = sum(count(b.target) for b in self.batches(p))
            return memo[p]

        return count(pos or self.start)

    def _tails(self, pos: Position) -> dict[int, int]:
        """Longest chain (in nodes) starting at each unvisited node, through unvisited nodes."""
        tails: dict[int, int] = {}
        for i in reversed(self._topological()):
            if (pos.visited >> i) & 1:
                continue
            tails[i] = 1 + max((tails[c] for c in self._children[i] if c in tails), default=0)
        return tails

    def _optimal_candidates(self, pos: Position, budget: int) -> Iterator[Batch]:
        """The legal steps from ``pos`` that can still finish within ``budget`` steps, in published order.

        A frontier node whose remaining chain fills the whole budget must run now, so only combinations holding
        all such nodes are considered; adding a fixed set to equal-size subsets keeps their lexicographic order.
        """
        if pos.pending:
            yield from self.batches(pos)
            return
        frontier = self.frontier(pos)
        tails = self._tails(pos)
        required = tuple(x for x in frontier if tails[x] >= budget)
        optional = [x for x in frontier if x not in required]
        for r in range(max(1, len(required)), len(frontier) + 1):
            for extra in combinations(optional, r - len(required)):
                comb = tuple(sorted(required + extra))
                batch = self.batch_with_nodes(pos, comb)
                if batch is not None:
                    yield batch

    def first_optimal_path(self) -> list[tuple[int, ...]]:
        """The first minimum-length path in published order (the teacher-forcing path), found by bounded search."""
        target = self.min_length

        def search(pos: Position, used: int) -> list[tuple[int, ...]] | None:
            if self.is_done(pos):
                return [] if used == target else None
            if used + self.remaining_length(pos) > target:
                return None
            for batch in self._optimal_candidates(pos, target - used):
                rest = search(batch.target, used + 1)
                if rest is not None:
                    return [batch.nodes, *rest]
            return None

        path = search(self.start, 0)
        if path is None:  # pragma: no cover - min_length is always reachable
            raise RuntimeError("no optimal path found")
        return path
