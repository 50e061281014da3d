"""A statement's Spark jobs, canceled when its budget says so.

Why: a Spark action blocks the statement's thread in the JVM, so the
budget's `check` (cancel request, statement_timeout) cannot run there.
The jobs the thread starts carry a tag unique to the statement (PySpark
pins each Python thread to a JVM thread, so the tag is this thread's); a
watcher thread polls the check and, once it fails, cancels the tagged jobs
at every poll until the body ends, interrupting their tasks: a cancel that
arrives while the statement is still planning (no job yet) or between two
of its jobs stops the next job too. The action then fails, and the
statement raises the check's error (57014) instead of Spark's.
"""

from __future__ import annotations

import contextlib
import threading
import uuid
from collections.abc import Iterator
from typing import Any

from coordinator_lib.compute.budget import UNLIMITED, QueryBudget

POLL_SECONDS = 0.1


@contextlib.contextmanager
def cancelable_jobs(spark: Any, budget: QueryBudget) -> Iterator[None]:
    """Run Spark actions in the body under `budget`'s check."""
    if budget is UNLIMITED:
        yield
        return
    context = spark.sparkContext
    tag = f"tidemark-statement-{uuid.uuid4().hex}"
    context.setInterruptOnCancel(True)
    context.addJobTag(tag)
    stop = threading.Event()
    failure: list[BaseException] = []

    def watch() -> None:
        while not stop.wait(POLL_SECONDS):
            if not failure:
                try:
                    budget.check()
                except BaseException as error:
                    failure.append(error)
            if failure:  # every poll: a job the body starts after the check failed dies too
                context.cancelJobsWithTag(tag)

    watcher = threading.Thread(target=watch, name="spark-cancel-watch", daemon=True)
    watcher.start()
    try:
        yield
    except Exception:
        if failure:
            raise failure[0] from None
        raise
    finally:
        stop.set()
        watcher.join()
        context.removeJobTag(tag)
        context.setInterruptOnCancel(False)
    budget.check()  # canceled as the last job finished: still canceled
