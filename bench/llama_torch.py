#!/usr/bin/env python3
"""llama_torch.py -- the PyTorch side of bench/llama_cpu.sh: eager fp32
training steps of transformers' LlamaForCausalLM on the CPU, on the shape and
batch that ztrain trains in the same run.

  python3 bench/llama_torch.py --threads 2 --steps 8 --layers 4 --batch 4 --seq 128 \
      --tokens data/tinyshakespeare.txt

The step is what `ztrain train` does per optimizer step: forward, mean
cross-entropy, backward, global-norm clipping at 1.0, AdamW (lr 3e-4, betas
0.9/0.95, eps 1e-8, weight decay 0.1 on the matrices).  Batches are
consecutive windows of the file's bytes (ztrain's byte tokens).  Prints one
line: `torch tokens/s: X (median of N steps after 1 warm-up, ms/step Y)`.
"""
import argparse
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--batch", type=int, default=4)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--tokens", required=True, help="a file whose bytes are the tokens")
    ap.add_argument("--attn", default="sdpa", help="transformers attention implementation")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    # SmolLM-135M's shape with fewer layers
    cfg = LlamaConfig(vocab_size=49152, hidden_size=576, intermediate_size=1536,
                      num_hidden_layers=a.layers, num_attention_heads=9, num_key_value_heads=3,
                      max_position_embeddings=max(a.seq, 2048), rms_norm_eps=1e-5,
                      rope_parameters={"rope_type": "default", "rope_theta": 10000.0},
                      tie_word_embeddings=True, attn_implementation=a.attn)
    model = LlamaForCausalLM(cfg).to(torch.float32)
    model.train()
    decay = [p for p in model.parameters() if p.ndim == 2]
    rest = [p for p in model.parameters() if p.ndim != 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=3e-4, betas=(0.9, 0.95), eps=1e-8)
    data = torch.frombuffer(bytearray(open(a.tokens, "rb").read()), dtype=torch.uint8).long()
    n = a.batch * (a.seq + 1)
    times = []
    for step in range(a.steps + 1):
        w = data[step * n:(step + 1) * n].view(a.batch, a.seq + 1)
        t0 = time.perf_counter()
        logits = model(input_ids=w[:, :-1]).logits
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, cfg.vocab_size), w[:, 1:].reshape(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        times.append(time.perf_counter() - t0)
    med = statistics.median(times[1:])
    print("torch tokens/s: %.1f (median of %d steps after 1 warm-up, ms/step %.1f; torch %s, %d threads, "
          "attention %s, %.1fM parameters)" % (a.batch * a.seq / med, a.steps, 1000 * med,
                                              torch.__version__.split("+")[0], torch.get_num_threads(),
                                              a.attn, sum(p.numel() for p in model.parameters()) / 1e6))


if __name__ == "__main__":
    main()
