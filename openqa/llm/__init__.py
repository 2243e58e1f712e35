"""LLM readers: any instruction model (in process with transformers, a GGUF file through llama.cpp, or
an OpenAI-compatible server) answering the question over openqa's evidence."""
