"""Readers: trained models that pick an option from retrieved evidence, chosen by name in ``registry``."""
