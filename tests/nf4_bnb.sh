#!/bin/bash
# nf4_bnb.sh -- NF4 quantization against bitsandbytes run live (optional:
# needs a Python that imports torch + bitsandbytes; SKIPs visibly otherwise).
#
# scripts/make_nf4_fixture.py --live quantizes, on the CPU with bitsandbytes'
# quantize_4bit(blocksize=64, quant_type="nf4", compress_statistics=0/1):
#   - 24 random weights (1..89 x 1..399, fp32 and bf16, plain and double
#     quantization, scales e^-6..e^3, some with leading zeros; a new seed
#     each run, printed: ZT_NF4_SEED=n repeats it);
#   - one 2048 x 1100 weight with double quantization, its offset (torch's
#     mean of 35200 absmax) at 1 and at 2 torch threads (the two-pass sum);
#   - with transformers importable: every q/k/v/o/gate/up/down weight of
#     tests/fixtures/hf/llama and qwen2 as AutoModelForCausalLM.from_pretrained
#     (..., quantization_config=BitsAndBytesConfig(load_in_4bit=True,
#     bnb_4bit_quant_type="nf4"[, bnb_4bit_use_double_quant=True]), dtype=
#     float32 | bfloat16) holds it (the checkpoint weight in the model dtype);
# and dequantizes each with dequantize_4bit to fp32 and bf16.  tests/test_nf4
# FILE then requires zt_nf4_quantize's codes, absmax (qabsmax, absmax2,
# offset) and both the host and the cpu-kernel dequantizations to be
# bitwise equal.  torch.compile is off (TORCHDYNAMO_DISABLE=1) for speed.
#
# ZT_HF_PYTHON picks the Python (default /opt/hfref/bin/python if present, else python3).
. "$(dirname "$0")/lib.sh"
if [ -z "${ZT_HF_PYTHON:-}" ]; then
    if [ -x /opt/hfref/bin/python ]; then ZT_HF_PYTHON=/opt/hfref/bin/python; else ZT_HF_PYTHON=python3; fi
fi
if ! "$ZT_HF_PYTHON" -c 'import torch, bitsandbytes' >/dev/null 2>&1; then
    skip_all "torch + bitsandbytes not importable (by $ZT_HF_PYTHON)"
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1 PYTHONHASHSEED=0 TORCHDYNAMO_DISABLE=1
"$ZT_HF_PYTHON" "$ZT_SRCDIR/scripts/make_nf4_fixture.py" --live "$tmp/live.bin" > "$tmp/py.out" 2>&1
rc=$?
grep -v 'Loading weights\|^W[0-9]' "$tmp/py.out" | diag
ok $rc "bitsandbytes quantized the reference cases"
[ $rc -eq 0 ] || { done_testing; exit; }
"$ZT_BUILDDIR/tests/test_nf4" "$tmp/live.bin" > "$tmp/tap.out" 2>&1
rc=$?
grep -c '^ok' "$tmp/tap.out" | sed 's/^/# checks passed: /'
grep -v '^ok' "$tmp/tap.out" | grep -v '^1\.\.' | diag
ok $rc "zt_nf4_quantize and nf4_dequant bitwise bitsandbytes on every case ($(grep -o '[0-9]* tensors, [0-9]* weights' "$tmp/tap.out"))"
done_testing
