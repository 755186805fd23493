"""The correctness run's results: one parser per input format, each returning a ``Reading``
(``cases.py``), and one ``TestResult`` made of them for the classifier.

- ``junit.py``: pytest's JUnit XML: cases, outcomes, failure messages, skip reasons and their counts.
- ``log.py`` (its line pass in ``log_scan.py``): the ``-v`` log, for what the XML cannot say
  (pytest's header, the case a dead process never finished and its crash line, every ``E`` line
  of a failure, Rust panics, an XPASS), and for every result it can when there is no XML.
- ``combine.py``: the ``TestResult`` the classifier reads, from both.
"""
