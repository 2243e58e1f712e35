"""Evaluation: accuracy with confidence intervals and ties (``metrics``), and the result files a
run leaves (``results``). Running a method over a split is ``openqa.pipeline.evaluate``."""
