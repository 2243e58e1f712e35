"""Retrieval engines behind one interface (``base.SearchEngine``), chosen by name in ``registry``."""
