"""openqa: open-domain question answering for medical licensing exams (MedQA)."""

__version__ = "0.1.0"
