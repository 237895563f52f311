"""Brute-force tree laws in plain Python (scalars, recursion): the independent side of the oracle tests.

Nothing here shares code with :mod:`specdec_check.exact._tree_kernels`: the rules are walked
node by node as rules.md section 3 states them, and SGLang's threshold rule integrates its
coin over the unit interval piece by piece.
"""

from __future__ import annotations

from collections import defaultdict


def children_of(parents):
    """slot -> its child slots in index order (slot 0 the root, slot i+1 node i)."""
    kids = defaultdict(list)
    for i, p in enumerate(parents):
        kids[p + 1].append(i + 1)
    return kids


def _normalised(vector):
    total = sum(vector)
    return [v / total for v in vector] if total > 0 else [0.0] * len(vector)


def _ratio(r, q):
    if q > 0:
        return min(1.0, r / q)
    return 1.0 if r > 0 else 0.0


def _threshold_accepts(p_children, single, acc):
    """P(child j is the one accepted) for SGLang's one-coin level, by integrating the coin."""
    acc = max(acc, 1e-9)
    cum, edges = 0.0, [0.0, 1.0]
    for p in p_children:
        cum += p
        edges.append(min(1.0, cum / acc))
    edges = sorted(set(edges))
    probs = [0.0] * len(p_children)
    for lo, hi in zip(edges, edges[1:]):
        coin = 0.5 * (lo + hi)
        cum = 0.0
        for j, p in enumerate(p_children):
            cum += p
            if coin <= cum / acc or p >= single:
                probs[j] += hi - lo
                break
    return probs


def brute_step_law(parents, ids, draft_rows, target_rows, rule):
    """{(slot, y): probability} of one tree step; ``rule`` a scheme name or ("sglang", single, acc)."""
    vocab = len(target_rows[0])
    kids = children_of(parents)
    law = defaultdict(float)

    def walk(slot, prob):
        p = list(target_rows[slot])
        r = list(p)
        children = kids[slot]
        if isinstance(rule, tuple):
            firsts = _threshold_accepts([p[ids[c - 1]] for c in children], rule[1], rule[2])
            left = prob
            for c, first in zip(children, firsts):
                if first > 0:
                    walk(c, prob * first)
                left -= prob * first
                r[ids[c - 1]] = 0.0
            r = _normalised(r)
            for y in range(vocab):
                law[(slot, y)] += max(left, 0.0) * r[y]
            return
        taken = []
        for c in children:
            x = ids[c - 1]
            if rule == "iid":
                q = list(draft_rows[slot])
            elif rule == "without_replacement":
                q = _normalised([0.0 if t in taken else draft_rows[slot][t] for t in range(vocab)])
            else:
                q = [1.0 if t == x else 0.0 for t in range(vocab)]
            a = _ratio(r[x], q[x])
            if a > 0:
                walk(c, prob * a)
            prob *= 1.0 - a
            r = _normalised([max(r[t] - q[t], 0.0) for t in range(vocab)])
            taken.append(x)
        for y in range(vocab):
            law[(slot, y)] += prob * r[y]

    walk(0, 1.0)
    return dict(law)


def brute_drafts(parents, rows_after, vocab, drafting):
    """[(ids, probability)] of every tree ``drafting`` can draft; ``rows_after(path) -> draft row``."""
    kids = children_of(parents)
    nodes = len(parents)
    results = []

    def path_of(slot, ids):
        path = []
        while slot:
            path.append(ids[slot - 1])
            slot = parents[slot - 1] + 1
        return tuple(reversed(path))

    def assign(slot_order, ids, prob):
        if not slot_order:
            results.append((tuple(ids), prob))
            return
        slot, rest = slot_order[0], slot_order[1:]
        children = kids[slot]
        q = rows_after(path_of(slot, ids))

        def sibling(k, taken, prob):
            if k == len(children):
                assign(rest, ids, prob)
                return
            c = children[k]
            if drafting == "topk":
                best = max((t for t in range(vocab) if t not in taken), key=lambda t: (q[t], -t))
                options = [(best, 1.0)]
            elif drafting == "iid":
                options = [(t, q[t]) for t in range(vocab) if q[t] > 0]
            else:
                mass = sum(q[t] for t in range(vocab) if t not in taken)
                options = [(t, q[t] / mass) for t in range(vocab) if t not in taken and q[t] > 0]
            for t, w in options:
                ids[c - 1] = t
                sibling(k + 1, taken + [t], prob * w)
            ids[c - 1] = -1

        sibling(0, [], prob)

    assign(list(range(nodes + 1)), [-1] * nodes, 1.0)
    return results
