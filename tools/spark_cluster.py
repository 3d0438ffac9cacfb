"""A real Spark standalone cluster on 127.0.0.1: a master and workers, pyspark's own classes (tests and benchmarks).

    with StandaloneCluster(workdir, workers=2) as cluster:
        env = cluster.driver_env()     # a driver's environment: PYSPARK_PYTHON is the executors' Python
        ...                            # spark-submit --master cluster.url ..., or a session on cluster.url

:class:`StandaloneCluster` starts ``org.apache.spark.deploy.master.Master`` and
``org.apache.spark.deploy.worker.Worker`` through the ``spark-class`` script of
the pyspark distribution, each a JVM of its own with its own work folder, and
stops them by the process ids it started (never by name).

The executors' Python (:attr:`StandaloneCluster.worker_python`) is this
interpreter started with ``-S`` (no ``site``: no site-packages, no ``.pth`` file,
so no editable install of the analyzer) and a folder of links to every
distribution of this environment except the analyzer's
(:func:`site_without_analyzer`): the analyzer's dependencies are there, the
analyzer is not, unless a job ships it. The workers' environment has no
PYTHONPATH, and their ``PATH`` no virtual environment, so no other Python can
step in. A driver uses it by setting ``PYSPARK_PYTHON`` (read by pyspark when its
context starts).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import threading
import time
from pathlib import Path

from tools.loopback import free_port

#: The entries of site-packages that are the analyzer itself (its editable install and metadata).
ANALYZER_ENTRIES = ("analyzer", "__editable__", "__editable___analyzer")


def spark_home() -> Path:
    """The pyspark distribution's folder (it holds ``bin/spark-class`` and the jars)."""
    import pyspark

    return Path(pyspark.__file__).resolve().parent


def site_without_analyzer(dest: Path) -> Path:
    """``dest``, a folder of links to this environment's site-packages, the analyzer's entries left out."""
    site = Path(sysconfig.get_paths()["purelib"])
    dest.mkdir(parents=True)
    for entry in site.iterdir():
        if entry.name.startswith(ANALYZER_ENTRIES) or entry.suffix == ".pth" or entry.name == "__pycache__":
            continue
        (dest / entry.name).symlink_to(entry)
    return dest


class StandaloneCluster:
    """A standalone master and ``workers`` workers (1 core each) on 127.0.0.1, in folder ``root``."""

    def __init__(self, root: Path, workers: int = 2, *, memory: str = "2g"):
        self.root = root
        self.workers = workers
        self.memory = memory
        self.processes: list[subprocess.Popen] = []
        self.url = ""
        self.worker_python = root / "worker-python"
        self.env = self._env()

    def _env(self) -> dict[str, str]:
        venv = os.environ.get("VIRTUAL_ENV")
        path = [p for p in os.environ.get("PATH", "").split(os.pathsep)
                if p and not (venv and p.startswith(venv)) and Path(p) != Path(sys.executable).parent]
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYSPARK_PYTHON")}
        env.update(PATH=os.pathsep.join(path), SPARK_HOME=str(spark_home()), SPARK_LOCAL_IP="127.0.0.1",
                   SPARK_LOG_DIR=str(self.root / "logs"), SPARK_NO_DAEMONIZE="1")
        return env

    def start(self, timeout: float = 120.0) -> "StandaloneCluster":
        """Start the master, then the workers; return once every worker has registered."""
        site = site_without_analyzer(self.root / "worker-site")
        # Spark puts pyspark.zip and py4j on PYTHONPATH; the dependencies go after them.
        self.worker_python.write_text(
            "#!/bin/sh\n"
            "# The executors' Python: no site-packages, the analyzer's dependencies without the analyzer.\n"
            f'PYTHONPATH="${{PYTHONPATH:+$PYTHONPATH:}}{site}" exec "{sys.executable}" -S "$@"\n')
        self.worker_python.chmod(0o755)
        spark_class = str(spark_home() / "bin" / "spark-class")
        port = free_port()
        self.url = f"spark://127.0.0.1:{port}"
        master_log = self.root / "master.log"
        self._spawn([spark_class, "org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                     "--port", str(port), "--webui-port", str(free_port())], self.root, master_log)
        for i in range(self.workers):
            work = self.root / f"worker-{i}"
            work.mkdir()
            self._spawn([spark_class, "org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                         "--cores", "1", "--memory", self.memory, "--work-dir", str(work),
                         "--webui-port", str(free_port()), self.url], work, self.root / f"worker-{i}.log")
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for p in self.processes:
                if p.poll() is not None:
                    raise RuntimeError(f"a Spark daemon ended with {p.returncode}: {self.logs()}")
            if master_log.exists() and master_log.read_text(errors="replace").count("Registering worker") >= self.workers:
                return self
            time.sleep(0.25)
        raise RuntimeError(f"the workers did not register within {timeout:.0f} s: {self.logs()}")

    def _spawn(self, cmd: list[str], cwd: Path, log: Path) -> None:
        with log.open("wb") as out:
            self.processes.append(subprocess.Popen(cmd, cwd=cwd, env=self.env, stdout=out, stderr=subprocess.STDOUT,
                                                   stdin=subprocess.DEVNULL))

    def driver_env(self) -> dict[str, str]:
        """The environment of a driver process for this cluster: its executors run :attr:`worker_python`."""
        return {**os.environ, "PYSPARK_PYTHON": str(self.worker_python), "SPARK_LOCAL_IP": "127.0.0.1"}

    def logs(self) -> str:
        """The last lines of every daemon's log (for a failure's message)."""
        out = []
        for log in sorted(self.root.glob("*.log")):
            out.append(f"--- {log.name}\n" + "\n".join(log.read_text(errors="replace").splitlines()[-15:]))
        return "\n".join(out)

    def stop(self) -> None:
        """Stop the workers, then the master, by the process ids started (SIGTERM, then SIGKILL)."""
        for p in reversed(self.processes):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in reversed(self.processes):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait(timeout=10)
        # Executors are the workers' children: a worker ends them when it is stopped.

    def __enter__(self) -> "StandaloneCluster":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def tree_rss_mb(roots: list[int]) -> float:
    """The resident memory of the processes ``roots`` and all their descendants now, in MB (Linux ``/proc``)."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
            status = Path(f"/proc/{entry}/status").read_text()
        except OSError:  # ended meanwhile
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
        rss[int(entry)] = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
    total, todo = 0, list(roots)
    while todo:
        pid = todo.pop()
        total += rss.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total / 1024


class PeakRss(threading.Thread):
    """The peak, over a block, of the summed resident memory of some process trees, sampled every 0.2 s."""

    def __init__(self, roots) -> None:
        super().__init__(daemon=True)
        self.roots = roots  # a callable giving the root pids (processes start during the block)
        self.peak_mb = 0.0
        self._halt = threading.Event()

    def run(self) -> None:
        while not self._halt.is_set():
            self.peak_mb = max(self.peak_mb, tree_rss_mb(self.roots()))
            self._halt.wait(0.2)

    def __enter__(self) -> "PeakRss":
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self._halt.set()
        self.join()
