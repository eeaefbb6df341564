"""A compact decoder-only transformer for character-level language modelling.

Written for Trainyard's example: plain PyTorch modules that run on torch 1.13 (no fused attention, no
torch.compile) and on current CUDA builds alike.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F


@dataclass
class ModelArgs:
    """Shape of the network; vocab_size comes from the data, the rest from the config file."""

    vocab_size: int
    block_size: int
    n_layer: int
    n_head: int
    n_embd: int
    dropout: float = 0.0


class CausalSelfAttention(nn.Module):
    """Multi-head attention with an explicit causal mask (works where scaled_dot_product_attention is missing)."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        if args.n_embd % args.n_head != 0:
            raise ValueError(f'n_embd ({args.n_embd}) must be divisible by n_head ({args.n_head})')
        self.n_head = args.n_head
        self.qkv = nn.Linear(args.n_embd, 3 * args.n_embd)
        self.out = nn.Linear(args.n_embd, args.n_embd)
        self.attn_drop = nn.Dropout(args.dropout)
        self.resid_drop = nn.Dropout(args.dropout)
        mask = torch.tril(torch.ones(args.block_size, args.block_size, dtype=torch.bool))
        self.register_buffer('mask', mask.view(1, 1, args.block_size, args.block_size), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, length, channels = x.shape
        head_dim = channels // self.n_head
        q, k, v = self.qkv(x).split(channels, dim=2)
        q = q.view(batch, length, self.n_head, head_dim).transpose(1, 2)
        k = k.view(batch, length, self.n_head, head_dim).transpose(1, 2)
        v = v.view(batch, length, self.n_head, head_dim).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(head_dim)
        scores = scores.masked_fill(~self.mask[:, :, :length, :length], float('-inf'))
        weights = self.attn_drop(F.softmax(scores.float(), dim=-1).to(q.dtype))
        y = (weights @ v).transpose(1, 2).contiguous().view(batch, length, channels)
        return self.resid_drop(self.out(y))


class FeedForward(nn.Module):
    """Position-wise MLP, 4x wide, GELU."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.up = nn.Linear(args.n_embd, 4 * args.n_embd)
        self.down = nn.Linear(4 * args.n_embd, args.n_embd)
        self.drop = nn.Dropout(args.dropout)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.down(F.gelu(self.up(x))))


class Block(nn.Module):
    """Pre-norm residual block: attention then MLP."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.norm1 = nn.LayerNorm(args.n_embd)
        self.attn = CausalSelfAttention(args)
        self.norm2 = nn.LayerNorm(args.n_embd)
        self.mlp = FeedForward(args)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class CharGPT(nn.Module):
    """Token + position embeddings, `n_layer` blocks, final norm, output head tied to the token embedding."""

    def __init__(self, args: ModelArgs):
        super().__init__()
        self.args = args
        self.token_emb = nn.Embedding(args.vocab_size, args.n_embd)
        self.pos_emb = nn.Embedding(args.block_size, args.n_embd)
        self.drop = nn.Dropout(args.dropout)
        self.blocks = nn.ModuleList(Block(args) for _ in range(args.n_layer))
        self.norm = nn.LayerNorm(args.n_embd)
        self.head = nn.Linear(args.n_embd, args.vocab_size, bias=False)
        self.head.weight = self.token_emb.weight
        self.apply(self._init_weights)
        # Residual projections scaled down with depth keeps early activations well conditioned.
        for name, parameter in self.named_parameters():
            if name.endswith(('out.weight', 'down.weight')):
                nn.init.normal_(parameter, mean=0.0, std=0.02 / math.sqrt(2 * args.n_layer))

    @staticmethod
    def _init_weights(module: nn.Module) -> None:
        if isinstance(module, nn.Linear):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def num_params(self) -> int:
        """Parameter count without position embeddings (the convention MFU estimates use)."""
        return sum(p.numel() for p in self.parameters()) - self.pos_emb.weight.numel()

    def forward(self, idx: torch.Tensor, targets: torch.Tensor | None = None):
        length = idx.shape[1]
        if length > self.args.block_size:
            raise ValueError(f'sequence length {length} exceeds block_size {self.args.block_size}')
        positions = torch.arange(length, device=idx.device)
        x = self.drop(self.token_emb(idx) + self.pos_emb(positions))
        for block in self.blocks:
            x = block(x)
        logits = self.head(self.norm(x))
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)).float(), targets.view(-1))
        return logits, loss

    def optimizer(self, weight_decay: float, learning_rate: float, betas: tuple[float, float]) -> torch.optim.AdamW:
        """AdamW with decay on matrices only (biases, norms and embeddings' 1-D params are not decayed)."""
        decay = [p for p in self.parameters() if p.dim() >= 2]
        no_decay = [p for p in self.parameters() if p.dim() < 2]
        groups = [{'params': decay, 'weight_decay': weight_decay}, {'params': no_decay, 'weight_decay': 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)

    def flops_per_iteration(self, tokens: int) -> float:
        """Approximate training FLOPs for `tokens` tokens: 6N per token plus attention's 12·L·H·Q·T."""
        a = self.args
        per_token = 6 * self.num_params() + 12 * a.n_layer * a.n_head * (a.n_embd // a.n_head) * a.block_size
        return per_token * tokens
