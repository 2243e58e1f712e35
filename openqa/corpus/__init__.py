"""The textbook corpus: OCR clean-up and paragraphs with stable ids."""
