"""pytest plugin (opt-in: ``-p _live_report``): writes each test's outcome
and duration, and every failure's traceback, to $CUSOFTMAX_LIVE_LOG as it
happens, so a run cut off by a time limit still says what failed."""
import os


def pytest_runtest_logreport(report):
    path = os.environ.get("CUSOFTMAX_LIVE_LOG")
    if not path:
        return
    if report.when != "call" and not report.failed:
        return
    with open(path, "a") as f:
        f.write(f"{report.outcome.upper()} {report.nodeid} [{report.when}] {report.duration:.2f}s\n")
        if report.failed:
            f.write(report.longreprtext[-2500:] + "\n---\n")
