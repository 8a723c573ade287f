#!/usr/bin/env python3
"""Writes a tiny llama with random weights, for tests against a real llama-server.

No weights can be downloaded on the project's machines, and none are needed: a
random-weight model serves every API of llama-server (chat, completions,
messages, responses, embeddings, grammars, tools) with the server's own
framing, naming, usage and metrics, which is what tokenprobe's tests read. The
tokenizer is llama.cpp's own vocabulary-only GGUF (models/ggml-vocab-llama-spm.gguf),
copied key for key, so token counts are the real SentencePiece ones.

Usage: tinyllama.py LLAMA_CPP_TREE OUT.gguf [SEED [TYPE]]  (uses the tree's own gguf-py)

SEED (default 20261126) draws the weights: another seed is another model of
the same shape, vocabulary and name, as a redeploy with other weights under
the same alias would serve (the model-identity tests swap them). TYPE (f32,
the default; f16; q8_0) writes the same weights in another precision, as a
redeploy of another quantization would serve (docs/MEASUREMENT.md, "The
model behind the name": the hard case).
"""
import sys
from pathlib import Path

tree, out = Path(sys.argv[1]), Path(sys.argv[2])
seed = int(sys.argv[3]) if len(sys.argv) > 3 else 20261126
qtype = sys.argv[4] if len(sys.argv) > 4 else "f32"
if qtype not in ("f32", "f16", "q8_0"):
    sys.exit(f"tinyllama.py: TYPE {qtype!r}: f32, f16 or q8_0")
sys.path.insert(0, str(tree / "gguf-py"))
import numpy as np  # noqa: E402
import gguf  # noqa: E402

vocab = gguf.GGUFReader(str(tree / "models" / "ggml-vocab-llama-spm.gguf"))
w = gguf.GGUFWriter(str(out), "llama")
# Copy the tokenizer and nothing of the vocabulary file's own architecture.
for field in vocab.fields.values():
    name = field.name
    if not name.startswith("tokenizer."):
        continue
    vtype = field.types[0]
    if vtype == gguf.GGUFValueType.ARRAY:
        sub = field.types[1]
        if sub == gguf.GGUFValueType.STRING:
            val = [bytes(field.parts[i]).decode("utf-8", "surrogateescape") for i in field.data]
        else:
            val = [field.parts[i][0].item() for i in field.data]
        w.add_key_value(name, val, vtype, sub_type=sub)
    elif vtype == gguf.GGUFValueType.STRING:
        w.add_key_value(name, bytes(field.parts[field.data[0]]).decode("utf-8"), vtype)
    else:
        w.add_key_value(name, field.parts[field.data[0]][0].item(), vtype)

n_vocab = len(vocab.fields["tokenizer.ggml.tokens"].data)
n_embd, n_layer, n_head, n_ff, n_ctx = 64, 2, 4, 128, 4096
w.add_name("tokenprobe-tiny-llama")
w.add_context_length(n_ctx)
w.add_embedding_length(n_embd)
w.add_block_count(n_layer)
w.add_feed_forward_length(n_ff)
w.add_head_count(n_head)
w.add_head_count_kv(n_head)
w.add_rope_dimension_count(n_embd // n_head)
w.add_layer_norm_rms_eps(1e-5)
w.add_file_type({"f32": gguf.LlamaFileType.ALL_F32, "f16": gguf.LlamaFileType.MOSTLY_F16,
                 "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0}[qtype])
# A chat template that renders tools, so --jinja serves tool calls.
w.add_chat_template(
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}"
    "{% if tools %}<|tools|>{{ tools | tojson }}\n{% endif %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")

rng = np.random.default_rng(seed)


def t(name, *shape):
    # The same draws whatever the type: only the precision they are kept in
    # differs (the norms stay F32, as llama.cpp's own conversions keep them).
    data = (rng.standard_normal(shape) * 0.02).astype(np.float32)
    if qtype == "f16":
        w.add_tensor(name, data.astype(np.float16))
    elif qtype == "q8_0":
        q = gguf.GGMLQuantizationType.Q8_0
        w.add_tensor(name, gguf.quants.quantize(data, q), raw_dtype=q)
    else:
        w.add_tensor(name, data)


t("token_embd.weight", n_vocab, n_embd)
w.add_tensor("output_norm.weight", np.ones(n_embd, dtype=np.float32))
t("output.weight", n_vocab, n_embd)
for i in range(n_layer):
    w.add_tensor(f"blk.{i}.attn_norm.weight", np.ones(n_embd, dtype=np.float32))
    for p in ("q", "k", "v", "output"):
        t(f"blk.{i}.attn_{p}.weight", n_embd, n_embd)
    w.add_tensor(f"blk.{i}.ffn_norm.weight", np.ones(n_embd, dtype=np.float32))
    t(f"blk.{i}.ffn_gate.weight", n_ff, n_embd)
    t(f"blk.{i}.ffn_up.weight", n_ff, n_embd)
    t(f"blk.{i}.ffn_down.weight", n_embd, n_ff)

w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
print(out)
