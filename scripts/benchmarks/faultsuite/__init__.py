"""The fault suite behind ``scripts/benchmarks/bench_faults.py``: the ``openqa`` console script against hostile
input and interruptions, counted into one record.

* ``synthetic``: a seeded MedQA-shaped data folder (books of medical words, answerable questions);
* ``cases``: hostile cases (bad files and flags, corrupted indexes, unreachable servers, wrong
  languages, messy pastes, a hostile environment, a full disk, a held lock);
* ``typed``: keys at a (pseudo-)terminal: Ctrl-C and Ctrl-D at the moments that used to lose them;
* ``text``: mangled and hostile text (Unicode manglings, lone surrogates, escape sequences shown);
* ``files``: pipes and FIFOs as question files, output paths that are not plain files (``/dev/stdout``
  appended to a file or piped), topics files as people write them, links and files where indexes
  and corpora are named;
* ``limits``: concurrent writers of one result set and of one tuned pair, a small address space,
  undecodable JSON;
* ``refusals``: the smaller refusals, option letters, ensemble parts and names, messages, offsets
  and credentials in an ``--endpoint``;
* ``comparing``: ``openqa compare`` over hostile runs and its ``--output``; parts read from
  predictions files (``--predictions PART=FILE``) by a named ensemble;
* ``scripts``: ``scripts/maintenance/get_model.py`` (kept off the network) and
  ``scripts/studies/llm_part.py`` as people run them;
* ``interruptions``: SIGINT and SIGKILL of ``openqa index`` (every engine), ``openqa eval`` and
  ``openqa tune --method ensemble``;
* ``tally``: how each run ended (clean error, answer, traceback, hang, wrong exit) and the figures;
* ``record``: the suite run end to end, as the record written to eval/results/benchmarks/bench-faults.json.
"""
