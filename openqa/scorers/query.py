"""The query modes of IR scorers: which words of the question go into each option's query. Kept
apart from the scorers so that the command line lists them without importing numpy."""

#: The modes ``openqa tune`` searches: MetaMap phrases (falls back to ``filter``), our medical
#: filter, the full question text.
TUNED_QUERY_MODES = ("phrases", "filter", "full")
#: ... and ``option``: none, the option alone, so that each option finds its own evidence for a reader.
QUERY_MODES = (*TUNED_QUERY_MODES, "option")
