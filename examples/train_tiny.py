"""Train a tiny character-level HCTransformer with each connection and compare the loss curves.

The corpus is real English text that ships with CPython: the help topics in
``pydoc_data.topics`` (about 465k characters), so nothing is downloaded. The last 10% is held
out for a validation loss. Every connection starts from the same seed and sees the same
batches.

    PYTHONPATH=. python examples/train_tiny.py                       # all four, 300 steps
    PYTHONPATH=. python examples/train_tiny.py --steps 100 --connections residual mhc
    PYTHONPATH=. python examples/train_tiny.py --plot loss.png       # plot elsewhere

Prints the training loss every ``--log-every`` steps, then a summary table; saves a plot of
the curves to reports/train_tiny.png when matplotlib is installed (``--plot ''`` to skip).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from rich.console import Console
from rich.table import Table

from hcspec.reference import HCTransformer
from hcspec.reference.transformer import CONNECTIONS, ConnectionName


def load_text() -> str:
    """The pydoc help topics of this Python, in a fixed (sorted) order."""
    from pydoc_data.topics import topics

    return "\n\n".join(topics[key] for key in sorted(topics))


@dataclass(frozen=True)
class Corpus:
    """Character-level encoding of a text, split into train and validation ids."""

    vocab: tuple[str, ...]
    train: torch.Tensor
    val: torch.Tensor

    @classmethod
    def from_text(cls, text: str, val_fraction: float = 0.1) -> Corpus:
        vocab = tuple(sorted(set(text)))
        index = {ch: i for i, ch in enumerate(vocab)}
        ids = torch.tensor([index[ch] for ch in text], dtype=torch.long)
        split = int(len(ids) * (1 - val_fraction))
        return cls(vocab, ids[:split], ids[split:])

    def batch(self, split: str, batch_size: int, seq_len: int, generator: torch.Generator
              ) -> tuple[torch.Tensor, torch.Tensor]:
        """Random windows: inputs ``[B, T]`` and next-character targets ``[B, T]``."""
        data = self.train if split == "train" else self.val
        starts = torch.randint(0, len(data) - seq_len - 1, (batch_size,), generator=generator)
        windows = torch.stack([data[s : s + seq_len + 1] for s in starts.tolist()])
        return windows[:, :-1], windows[:, 1:]


@dataclass
class Config:
    """Model and optimisation settings (defaults: a ~0.1M-parameter model, 300 steps)."""

    steps: int = 300
    batch_size: int = 16
    seq_len: int = 64
    d: int = 64
    layers: int = 2
    heads: int = 4
    n: int = 4
    lr: float = 3e-3
    seed: int = 0
    log_every: int = 25
    val_batches: int = 8
    device: str = "cpu"


@dataclass
class Result:
    """Loss per training step, final validation loss, parameter count and wall time."""

    connection: str
    losses: list[float] = field(default_factory=list)
    val_loss: float = math.nan
    parameters: int = 0
    seconds: float = 0.0


def train(connection: ConnectionName, corpus: Corpus, config: Config,
          log: Console | None = None) -> Result:
    """Train one model with AdamW on random windows; return its loss curve."""
    torch.manual_seed(config.seed)
    model = HCTransformer(
        len(corpus.vocab), config.d, config.layers, config.heads, config.n, connection,
        max_seq_len=config.seq_len, device=config.device,
    )
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=0.01)
    batches = torch.Generator().manual_seed(config.seed)  # same batches for every connection
    result = Result(connection, parameters=sum(p.numel() for p in model.parameters()))
    start = time.perf_counter()
    for step in range(1, config.steps + 1):
        inputs, targets = corpus.batch("train", config.batch_size, config.seq_len, batches)
        logits = model(inputs.to(config.device))
        loss = F.cross_entropy(logits.flatten(0, 1), targets.flatten().to(config.device))
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        result.losses.append(loss.item())
        if log is not None and (step % config.log_every == 0 or step == 1):
            log.print(f"  {connection:<10} step {step:>5}  loss {loss.item():.3f}")
    result.seconds = time.perf_counter() - start
    model.eval()
    with torch.no_grad():
        val = [
            F.cross_entropy(model(x.to(config.device)).flatten(0, 1),
                            y.flatten().to(config.device)).item()
            for x, y in (corpus.batch("val", config.batch_size, config.seq_len, batches)
                         for _ in range(config.val_batches))
        ]
    result.val_loss = sum(val) / len(val)
    return result


def save_plot(results: list[Result], path: str) -> bool:
    """Plot the (smoothed) training curves; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig, ax = plt.subplots(figsize=(7, 4))
    for result in results:
        window = max(1, len(result.losses) // 30)
        smooth = [sum(result.losses[max(0, i - window + 1) : i + 1])
                  / len(result.losses[max(0, i - window + 1) : i + 1])
                  for i in range(len(result.losses))]
        ax.plot(range(1, len(smooth) + 1), smooth, label=result.connection)
    ax.set_xlabel("step")
    ax.set_ylabel(f"training loss (moving mean of {window})")
    ax.set_title("HCTransformer on pydoc_data.topics (char level)")
    ax.legend()
    fig.tight_layout()
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return True


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    defaults = Config()
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--connections", nargs="+", choices=CONNECTIONS, default=list(CONNECTIONS))
    parser.add_argument("--steps", type=int, default=defaults.steps)
    parser.add_argument("--batch-size", type=int, default=defaults.batch_size)
    parser.add_argument("--seq-len", type=int, default=defaults.seq_len)
    parser.add_argument("--d", type=int, default=defaults.d, help="hidden size")
    parser.add_argument("--layers", type=int, default=defaults.layers)
    parser.add_argument("--heads", type=int, default=defaults.heads)
    parser.add_argument("--n", type=int, default=defaults.n, help="expansion rate")
    parser.add_argument("--lr", type=float, default=defaults.lr)
    parser.add_argument("--seed", type=int, default=defaults.seed)
    parser.add_argument("--log-every", type=int, default=defaults.log_every)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, or auto")
    parser.add_argument("--threads", type=int, default=None, help="torch CPU threads")
    parser.add_argument("--plot", default="reports/train_tiny.png", help="'' to skip the plot")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> list[Result]:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    device = args.device
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() else "cpu"
    config = Config(
        steps=args.steps, batch_size=args.batch_size, seq_len=args.seq_len, d=args.d,
        layers=args.layers, heads=args.heads, n=args.n, lr=args.lr, seed=args.seed,
        log_every=args.log_every, device=device,
    )
    console = Console()
    corpus = Corpus.from_text(load_text())
    console.print(f"corpus: {len(corpus.train)} train / {len(corpus.val)} val characters, "
                  f"vocab {len(corpus.vocab)}; device {device}; {config}")
    results = [train(name, corpus, config, console) for name in args.connections]

    uniform = math.log(len(corpus.vocab))
    table = Table(title=f"after {config.steps} steps (uniform guess: loss {uniform:.3f})")
    for column in ("connection", "params", "first loss", "last-20 mean", "val loss", "seconds"):
        table.add_column(column, justify="left" if column == "connection" else "right")
    for r in results:
        tail = r.losses[-20:]
        table.add_row(r.connection, f"{r.parameters:,}", f"{r.losses[0]:.3f}",
                      f"{sum(tail) / len(tail):.3f}", f"{r.val_loss:.3f}", f"{r.seconds:.1f}")
    console.print(table)
    if args.plot:
        saved = save_plot(results, args.plot)
        console.print(f"plot saved to {args.plot}" if saved else "no matplotlib: plot skipped")
    return results


if __name__ == "__main__":
    main()
