"""Option scorers that need no training, chosen by name from ``registry``."""
