"""The fault suite behind ``scripts/bench_faults.py``: the ``openqa`` console script against hostile
input and interruptions, counted into one record.

* ``synthetic``: a seeded MedQA-shaped data folder (books of medical words, answerable questions);
* ``cases``: hostile cases (bad files and flags, corrupted indexes, unreachable servers, wrong
  languages, messy pastes, a hostile environment, a full disk, a held lock);
* ``typed``: keys at a (pseudo-)terminal: Ctrl-C and Ctrl-D at the moments that used to lose them;
* ``interruptions``: SIGINT and SIGKILL of ``openqa index`` (every engine) and ``openqa eval``;
* ``tally``: how each run ended (clean error, answer, traceback, hang, wrong exit) and the figures;
* ``record``: the suite run end to end, as the record written to eval/results/bench-faults.json.
"""
