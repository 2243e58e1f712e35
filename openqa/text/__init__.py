"""Text processing shared by every engine and scorer: tokenizers and the medical query filter."""

from openqa.text.tokenize import Tokenizer, make_tokenizer

__all__ = ["Tokenizer", "make_tokenizer"]
