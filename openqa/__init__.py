"""openqa: open-domain question answering for medical licensing exams (MedQA)."""

from openqa.limits import single_blas_thread_under_memory_limit

__version__ = "0.1.0"

single_blas_thread_under_memory_limit()  # before any module of the package imports numpy
