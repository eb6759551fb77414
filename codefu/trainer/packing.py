"""Shared-prefix packing (`trainer.packing: shared_prefix`): a micro-batch's rows laid out end to end in one
row without padding, and rows that begin with the same tokens (the n samples of one prompt) computing
those tokens once.

Why it is exact: attention is causal, so the hidden states of a row's first S tokens depend on those tokens
alone; rows that agree on them have the same states there. A packed row holds, for each group of such rows,
the shared prefix once and then each row's remainder (its "branch"):

    [prefix g0][branch g0.1][branch g0.2] ... [prefix g1][branch g1.1] ... [padding to a multiple of 128]

A token attends to the earlier tokens of its own group's prefix and of its own branch; rotary positions
continue the prefix in every branch. Gradients through the prefix add up over its branches, as they would
over the rows it stands for. The shared prefix stops one token before each row's first trained token, so
the position that predicts a trained token always lies in that token's own branch: every output is one
branch's, and nothing is shared between rows but context.

On CUDA the mask is FlexAttention's block mask (block-sparse: blocks no token of which may attend cost
nothing, and no L x L tensor exists); on CPU, where FlexAttention has no backward, SDPA runs piece by
piece (a prefix causally, a branch against its prefix and itself), no L x L tensor either.

The pure parts (groups, units, layout) are tested against the padded computation; the attention function
plugs into transformers' registry like the Ulysses one (sequence_parallel.py).
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from codefu.trainer.batch import split_across_ranks

ATTENTION_NAME = "codefu_packed"
BLOCK = 128  # FlexAttention's block size: packed rows are padded to a multiple of it


@dataclass
class PrefixGroup:
    """Batch rows that share their first `shared` tokens (computed once)."""

    shared: int
    rows: list[int]

    def cost(self, lengths: list[int]) -> int:
        """Tokens this group occupies in a packed row: the prefix once, then each row's remainder."""
        return self.shared + sum(lengths[r] - self.shared for r in self.rows)


def shareable_length(response_mask: Tensor, length: int) -> int:
    """How many leading tokens of a row may be shared: all before the position that predicts its first
    trained token (column t is predicted at position t - 1); a row with nothing trained keeps one token."""
    trained = response_mask[:length].nonzero()
    return int(trained[0]) - 1 if len(trained) else length - 1


def prefix_groups(
    input_ids: Tensor, lengths: list[int], response_mask: Tensor, rows: list[int]
) -> list[PrefixGroup]:
    """Group `rows` (of (B, T) batch tensors on the CPU) by shared prefix, in a deterministic order.

    Rows are taken by increasing shareable length; a row joins the first group whose whole prefix it
    begins with and may share, else starts a group whose prefix is all it may share. A GRPO group's rows
    (one prompt, n responses) all become one group sharing the prompt but its last token."""
    limit = {r: shareable_length(response_mask[r], lengths[r]) for r in rows}
    # Python lists: a comparison stops at the first difference, and two prompts (whose templates agree at
    # both ends) nearly always differ in the middle, which is looked at first
    tokens = {r: input_ids[r, : lengths[r]].tolist() for r in rows}
    groups: list[PrefixGroup] = []
    for r in sorted(rows, key=lambda r: (limit[r], r)):
        row = tokens[r]
        for g in groups:
            s, head = g.shared, tokens[g.rows[0]]
            if s <= limit[r] and (s == 0 or (row[s // 2] == head[s // 2] and row[:s] == head[:s])):
                g.rows.append(r)
                break
        else:
            groups.append(PrefixGroup(limit[r], [r]))
    for g in groups:
        g.rows.sort()
    return sorted(groups, key=lambda g: g.rows[0])


def fit_to_budget(groups: list[PrefixGroup], lengths: list[int], budget: int) -> list[PrefixGroup]:
    """Cut groups whose packed size exceeds `budget` into parts that fit (each repeats the prefix; longest
    rows first). A row that alone exceeds the budget gets a part of its own, as in padded packing."""
    out: list[PrefixGroup] = []
    for g in groups:
        if g.cost(lengths) <= budget:
            out.append(g)
            continue
        part: list[int] = []
        size = g.shared
        for r in sorted(g.rows, key=lambda r: (-lengths[r], r)):
            branch = lengths[r] - g.shared
            if part and size + branch > budget:
                out.append(PrefixGroup(g.shared, sorted(part)))
                part, size = [], g.shared
            part.append(r)
            size += branch
        out.append(PrefixGroup(g.shared, sorted(part)))
    return out


def pack_groups(costs: list[int], budget: int) -> list[list[int]]:
    """First-fit decreasing of items of the given packed sizes into bins of at most `budget` tokens (no
    padding: a bin's size is the sum of its items'). Returns lists of positions into `costs`."""
    bins: list[list[int]] = []
    load: list[int] = []
    for i in sorted(range(len(costs)), key=lambda i: (-costs[i], i)):
        for b in range(len(bins)):
            if load[b] + costs[i] <= budget:
                bins[b].append(i)
                load[b] += costs[i]
                break
        else:
            bins.append([i])
            load.append(costs[i])
    return bins


@dataclass
class PackedLayout:
    """One micro-batch as one packed row (see the module docstring), with the maps back to the batch.

    The outputs are computed at `src` only, the positions predicting a trained token; output k goes to
    row `dst_row[k]` (of the micro-batch's rows, in order) at column `dst_col[k]`, the column layout of
    `PolicyModel.forward` (column j predicts batch column j + 1), and predicts token `targets[k]`.
    """

    input_ids: Tensor  # (1, L) int64
    position_ids: Tensor  # (1, L) int64
    segment: Tensor  # (L,) int32: the group of each token in this row; -1 on the padding
    branch: Tensor  # (L,) int32: 0 on a group's prefix, k >= 1 on its k-th row's remainder
    src: Tensor  # (N,) int64 positions in the packed row
    dst_row: Tensor  # (N,) int64
    dst_col: Tensor  # (N,) int64
    targets: Tensor  # (N,) int64
    # (K, 4) int64, the row cut into pieces that cover it in order: queries [q0, q1) attend to keys
    # [p0, p1) (their prefix, all of it) and causally to themselves; prefixes and padding have p0 = p1
    pieces: Tensor

    @property
    def tokens(self) -> int:
        """Positions computed, padding included."""
        return self.input_ids.shape[1]

    def to(self, device: torch.device | str) -> PackedLayout:
        return PackedLayout(**{f.name: getattr(self, f.name).to(device) for f in fields(self)})


def plan_micro_batches(
    input_ids: Tensor, lengths: list[int], response_mask: Tensor, rows: list[int], budget: int, ranks: int
) -> list[list[list[PrefixGroup]]]:
    """Per data-parallel rank, its micro-batches as lists of groups: `rows` grouped by shared prefix, the
    groups cut to `budget`, dealt to `ranks` balancing packed tokens, then packed first-fit decreasing."""
    units = fit_to_budget(prefix_groups(input_ids, lengths, response_mask, rows), lengths, budget)
    costs = [u.cost(lengths) for u in units]
    plan = []
    for part in split_across_ranks(costs, ranks):
        bins = pack_groups([costs[j] for j in part], budget)
        plan.append([[units[part[k]] for k in sorted(b)] for b in bins])
    return plan


def rows_of(groups: list[PrefixGroup]) -> list[int]:
    """The batch rows of a packed micro-batch, in the order of its layout's `dst_row`."""
    return [r for g in groups for r in g.rows]


def packed_layout(
    input_ids: Tensor,
    lengths: list[int],
    response_mask: Tensor,
    groups: list[PrefixGroup],
    multiple: int = BLOCK,
) -> PackedLayout:
    """The packed row of `groups` (rows of the CPU tensors of the whole batch); outputs at the positions
    predicting `response_mask` tokens, `dst_row` counting the rows in `rows_of(groups)` order."""
    ids, pos, seg, br = [], [], [], []
    src, dst_row, dst_col, targets = [], [], [], []
    pieces: list[tuple[int, int, int, int]] = []
    at = 0
    local = 0
    for g_index, g in enumerate(groups):
        s = g.shared
        prefix = (at, at + s)
        if s:
            pieces.append((at, at + s, at, at))
        ids.append(input_ids[g.rows[0], :s])
        pos.append(torch.arange(s))
        seg.append(torch.full((s,), g_index))
        br.append(torch.zeros(s, dtype=torch.long))
        at += s
        for k, r in enumerate(g.rows, start=1):
            n = lengths[r] - s
            ids.append(input_ids[r, s : lengths[r]])
            pos.append(torch.arange(s, lengths[r]))
            seg.append(torch.full((n,), g_index))
            br.append(torch.full((n,), k))
            # trained columns t in (s, length): predicted at position t - 1, packed at at + (t - 1 - s)
            cols = response_mask[r, s + 1 : lengths[r]].nonzero().flatten() + s + 1
            src.append(at + cols - 1 - s)
            dst_row.append(torch.full_like(cols, local))
            dst_col.append(cols - 1)
            targets.append(input_ids[r, cols])
            pieces.append((at, at + n, *prefix))
            at += n
            local += 1
    pad = -at % multiple
    if pad:
        pieces.append((at, at + pad, at, at))
    ids.append(torch.zeros(pad, dtype=torch.long))
    pos.append(torch.zeros(pad, dtype=torch.long))
    seg.append(torch.full((pad,), -1))
    br.append(torch.zeros(pad, dtype=torch.long))
    return PackedLayout(
        input_ids=torch.cat(ids).long()[None],
        position_ids=torch.cat(pos).long()[None],
        segment=torch.cat(seg).int(),
        branch=torch.cat(br).int(),
        src=torch.cat(src).long(),
        dst_row=torch.cat(dst_row).long(),
        dst_col=torch.cat(dst_col).long(),
        targets=torch.cat(targets).long(),
        pieces=torch.tensor(pieces, dtype=torch.long).reshape(-1, 4),
    )


# ----------------------------------------------------------------------------------------------------
# the attention mask and function


def _mask_mod(segment: Tensor, branch: Tensor):
    def mask_mod(b: Any, h: Any, q: Tensor, kv: Tensor) -> Tensor:
        own = (branch[kv] == 0) | (branch[kv] == branch[q])
        return (segment[q] == segment[kv]) & (kv <= q) & own

    return mask_mod


_block_mask_fn: Any = None

# FlexAttention's tiles for the shared-prefix mask, by (GPU capability major, minor, head dim), measured
# with bench/flex_attention.py on GRPO micro-batches (docs/benchmarks.md, "The shared-prefix attention
# kernel"): Inductor's defaults suit a dense causal mask, not blocks this sparse and this often partial.
# Forward: BLOCK_M x BLOCK_N; backward: BLOCK_M1 x BLOCK_N1 (dK, dV) and BLOCK_M2 x BLOCK_N2 (dQ).
FLEX_TILES: dict[tuple[int, int, int], dict[str, int]] = {
    # Hopper, head dim 128 (Qwen2.5-7B): backward 10.9 ms against 12.9 with the default tiles (H100,
    # a 25.9k-position GRPO micro-batch, 2026-12-05); the default forward tiles were the best tried
    (9, 0, 128): {
        "bwd_BLOCK_M1": 32,
        "bwd_BLOCK_N1": 64,
        "bwd_BLOCK_M2": 64,
        "bwd_BLOCK_N2": 32,
        "bwd_num_warps": 4,
        "bwd_num_stages": 3,
    },
}

_capability: tuple[int, int] = (0, 0)  # the GPU's, noted by packed_attention_mask (outside compiled code)


def flex_kernel_options(capability: tuple[int, int], head_dim: int, length: int) -> dict[str, Any]:
    """FlexAttention's kernel options for a packed row of `length` positions: a row padded to a multiple
    of BLOCK needs no bounds checks, which Inductor cannot prove itself once the length is dynamic; then
    the tiles measured for the GPU. (Not ROWS_GUARANTEED_SAFE: a query's first key block may hold none of
    its keys, another branch's, and that option then gives NaN.)"""
    options: dict[str, Any] = {"IS_DIVISIBLE": True} if length % BLOCK == 0 else {}
    return options | FLEX_TILES.get((*capability, head_dim), {})


def packed_attention_mask(layout: PackedLayout) -> Any:
    """What the decoder takes as `attention_mask` for a packed row: FlexAttention's BlockMask on CUDA;
    elsewhere the row's pieces as a (1, 1, K, 4) int64 tensor, attended one by one (`_by_pieces`). Both are
    4-D, which transformers passes to the attention function as it is."""
    L = layout.tokens
    mask_mod = _mask_mod(layout.segment, layout.branch)
    if layout.segment.device.type == "cuda":
        global _block_mask_fn, _capability
        _capability = torch.cuda.get_device_capability(layout.segment.device)
        if _block_mask_fn is None:
            from torch.nn.attention.flex_attention import create_block_mask

            # compiled: evaluated block by block on the GPU (eager would build L x L int tensors)
            _block_mask_fn = torch.compile(create_block_mask, dynamic=True)
        return _block_mask_fn(mask_mod, None, None, L, L, device=layout.segment.device)
    return layout.pieces[None, None]


def dense_mask(layout: PackedLayout) -> Tensor:
    """(L, L) bool, True where a query may attend to a key: the mask both attention paths apply (tests)."""
    q = torch.arange(layout.tokens)
    return _mask_mod(layout.segment, layout.branch)(None, None, q[:, None], q[None, :])


def _by_pieces(
    query: Tensor, key: Tensor, value: Tensor, pieces: Tensor, scaling: float | None, dropout: float = 0.0
) -> Tensor:
    """Attention over a packed row one piece at a time (see `PackedLayout.pieces`): SDPA's causal kernel
    for a prefix, a small (n, p + n) mask for a branch; no L x L tensor. (1, h, L, d) -> (1, h, L, d)."""
    gqa = query.shape[1] != key.shape[1]
    outs = []
    for q0, q1, p0, p1 in pieces.tolist():
        q, k, v = query[:, :, q0:q1], key[:, :, q0:q1], value[:, :, q0:q1]
        if p0 == p1:
            outs.append(
                F.scaled_dot_product_attention(
                    q, k, v, dropout_p=dropout, is_causal=True, scale=scaling, enable_gqa=gqa
                )
            )
            continue
        n, p = q1 - q0, p1 - p0
        k = torch.cat([key[:, :, p0:p1], k], 2)
        v = torch.cat([value[:, :, p0:p1], v], 2)
        mask = torch.ones(n, p + n, dtype=torch.bool, device=query.device)
        mask[:, p:] = torch.ones(n, n, dtype=torch.bool, device=query.device).tril()
        outs.append(
            F.scaled_dot_product_attention(
                q, k, v, attn_mask=mask, dropout_p=dropout, scale=scaling, enable_gqa=gqa
            )
        )
    return torch.cat(outs, 2)


_flex_fn: Any = None


def packed_attention(
    module: nn.Module,
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attention_mask: Any,
    dropout: float = 0.0,
    scaling: float | None = None,
    **kwargs: Any,
) -> tuple[Tensor, None]:
    """transformers attention-function signature: query (1, h, L, d), key/value (1, kv, L, d), the mask of
    `packed_attention_mask(layout)` -> output (1, L, h, d)."""
    if getattr(module, "sliding_window", None):
        raise NotImplementedError("trainer.packing='shared_prefix' does not support sliding-window layers")
    gqa = query.shape[1] != key.shape[1]
    if isinstance(attention_mask, Tensor):
        out = _by_pieces(query, key, value, attention_mask[0, 0], scaling, dropout)
    else:
        global _flex_fn
        if _flex_fn is None:
            from torch.nn.attention.flex_attention import flex_attention

            # eager FlexAttention materializes every score; compiled, it is a fused block-sparse kernel
            # (inside a compiled decoder layer, trainer.compile, dynamo traces through this wrapper)
            _flex_fn = torch.compile(flex_attention, dynamic=True)
        options = flex_kernel_options(_capability, query.shape[-1], query.shape[2])
        out = _flex_fn(
            query,
            key,
            value,
            block_mask=attention_mask,
            scale=scaling,
            enable_gqa=gqa,
            kernel_options=options,
        )
    return out.transpose(1, 2).contiguous(), None


def enable_packing(lm: nn.Module) -> None:
    """Switch a transformers causal LM to `packed_attention` (for every forward: packed rows only)."""
    from transformers import AttentionInterface

    if getattr(lm.config.get_text_config(), "sliding_window", None) and getattr(
        lm.config.get_text_config(), "use_sliding_window", False
    ):
        raise ValueError("trainer.packing='shared_prefix' does not support sliding-window attention models")
    AttentionInterface.register(ATTENTION_NAME, packed_attention)
    lm.set_attn_implementation(ATTENTION_NAME)
