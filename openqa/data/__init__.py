"""Question data: the MedQA dataset registry and validated loading of its splits."""

from openqa.data.files import load_questions, read_question_file, read_question_file_digest, split_file
from openqa.data.questions import (
    DATASETS,
    DEFAULT_EXAMS,
    QUESTION_FILE,
    SPLITS,
    TRAINABLE_SPLITS,
    DatasetSpec,
    Question,
    dataset_spec,
    exam_dataset,
    parse_train_split,
    split_questions,
)

__all__ = [
    "DATASETS",
    "DEFAULT_EXAMS",
    "QUESTION_FILE",
    "SPLITS",
    "TRAINABLE_SPLITS",
    "DatasetSpec",
    "Question",
    "dataset_spec",
    "exam_dataset",
    "load_questions",
    "split_file",
    "parse_train_split",
    "read_question_file",
    "read_question_file_digest",
    "split_questions",
]
