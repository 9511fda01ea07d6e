"""The smoke chapter as a kernel developer runs it: an ordinary user, Debian's own python3.

CI runs as root with a newer Python, which hid two failures a plain user on stock Debian 12
met at once (``tarfile``'s ``filter=`` is missing from Python 3.11.2; the root mmdebstrap made
with ``--mode=unshare`` belonged to subordinate ids). This test runs
``make reproduce CHAPTER=smoke`` the way that user would. As root it makes (once) an
unprivileged user with subordinate id ranges, copies the working tree into a directory that
user owns and runs make there as that user, with ``PYTHON=/usr/bin/python3`` and a clean
environment; as an ordinary user it does the same as itself. The copy and the user's cache
(toolchain root, source, ccache) persist, so a second ``make test`` on a machine is warm.
Published runs go to a temporary directory; the repository's ``data/`` is never written.
"""

from __future__ import annotations

import json
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from lab import ROOT
from lab.pipeline import cachedir, publish

SYSTEM_PYTHON = Path("/usr/bin/python3")
USER = "kernel-book-test"
"""The unprivileged user the test makes when it runs as root (a name no person uses)."""
SUBID_COUNT = 65536
PASSED_ENV = ("http_proxy", "https_proxy", "no_proxy", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
              "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL", "PIP_CERT", "PIP_TRUSTED_HOST",
              "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "DEBIAN_MIRROR")
"""What a developer's shell would also have: how to reach the package archives, nothing else
(no pyenv PATH, no VIRTUAL_ENV, no MAKEFLAGS of the outer make)."""


def _free_subid_start(path: Path) -> int:
    """The first id after every range already in ``path`` (and not below useradd's 100000)."""
    ends = [100000]
    for line in path.read_text().splitlines() if path.is_file() else []:
        fields = line.split(":")
        if len(fields) == 3 and fields[1].isdigit() and fields[2].isdigit():
            ends.append(int(fields[1]) + int(fields[2]))
    return max(ends)


def ensure_user(name: str = USER) -> pwd.struct_passwd:
    """Create ``name`` with a home directory and subordinate uid/gid ranges, if missing.

    useradd gives a new user subordinate ids only when ``/etc/subuid`` already exists, so the
    ranges are added explicitly where they are missing (mmdebstrap's unshare mode needs them).
    """
    try:
        user = pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "--create-home", "--shell", "/bin/bash",
                        "--comment", "kernel-book unprivileged test", name], check=True)
        user = pwd.getpwnam(name)
    for path, flag in ((Path("/etc/subuid"), "--add-subuids"), (Path("/etc/subgid"),
                                                                "--add-subgids")):
        owners = [line.split(":", 1)[0] for line in
                  (path.read_text().splitlines() if path.is_file() else [])]
        if name not in owners and str(user.pw_uid) not in owners:
            start = _free_subid_start(path)
            subprocess.run(["usermod", flag, f"{start}-{start + SUBID_COUNT - 1}", name],
                           check=True)
    return user


def working_tree_files(repo: Path = ROOT) -> list[str]:
    """Tracked and untracked-but-not-ignored files that exist: the tree as a reader sees it."""
    out = subprocess.run(["git", "-C", str(repo), "ls-files", "-z", "--cached", "--others",
                          "--exclude-standard"], capture_output=True, check=True).stdout
    names = sorted({n for n in out.decode().split("\0") if n})
    return [n for n in names if (repo / n).is_file() or (repo / n).is_symlink()]


def copy_working_tree(dest: Path, repo: Path = ROOT) -> None:
    """Make ``dest`` a clone of ``repo`` at HEAD with the working tree's files on top.

    A clone, not a bare copy, so the run's manifest names the book's commit and its diff as it
    would in the reader's own checkout. ``.venv`` is kept between runs: its stamp is newer
    than the copied lock (copy2 keeps times), so a warm run does not reinstall Python.
    """
    venv = dest / ".venv"
    kept = dest.with_name(dest.name + ".venv")
    if venv.is_dir():
        shutil.rmtree(kept, ignore_errors=True)
        venv.rename(kept)
    shutil.rmtree(dest, ignore_errors=True)
    subprocess.run(["git", "clone", "-q", "--no-local", "--depth", "1", f"file://{repo}",
                    str(dest)], check=True)
    for name in (n for n in working_tree_files(dest) if not (repo / n).exists()):
        (dest / name).unlink()  # deleted in the working tree, not yet committed
    for name in working_tree_files(repo):
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        if target.is_symlink() or target.exists():
            target.unlink()
        shutil.copy2(repo / name, target, follow_symlinks=False)
    if kept.is_dir():
        kept.rename(venv)


SEED_LIMIT = 2 << 30
"""Bytes of the runner's compiler cache the test copies at most (beyond that it runs cold)."""


def seed_cache(dest: Path, user: pwd.struct_passwd) -> None:
    """Copy the test runner's verified base tarball and compiler cache to ``dest`` once.

    The user's path is still exercised whole (the toolchain root is made by the user, the
    tarball is verified and unpacked by the user's Python, the kernel is built by the user's
    make), but a fresh CI machine does not pay twice for what the root path just compiled."""
    for name in ("tarballs", "ccache"):
        src, target = cachedir.cache_root() / name, dest / name
        if not src.is_dir() or target.exists():
            continue
        size = sum(f.stat().st_size for f in src.rglob("*") if f.is_file())
        if size <= SEED_LIMIT:
            shutil.copytree(src, target)
            chown_tree(target, user)


def chown_tree(path: Path, user: pwd.struct_passwd) -> None:
    """Give ``path`` and everything under it to ``user`` (symlinks themselves, not targets)."""
    subprocess.run(["chown", "-R", "--no-dereference", f"{user.pw_uid}:{user.pw_gid}",
                    str(path)], check=True)


@dataclass(frozen=True)
class Developer:
    """An ordinary user's run: how to run as them, their working copy, cache and results."""

    prefix: list[str]
    tree: Path
    cache: Path
    runs: Path
    user: str


@pytest.fixture
def developer() -> Iterator[Developer]:
    """An ordinary user ready to run ``make``, with a fresh copy of the working tree.

    As root: the test user, its copy under its home, a runs directory it owns, and a clean
    environment. Otherwise: the current user and a copy beside its kernel-book cache.
    """
    if os.geteuid() == 0:
        user = ensure_user()
        as_user = ["runuser", "-u", user.pw_name, "--"]
        cache_home = Path(user.pw_dir) / ".cache"
    else:
        user = pwd.getpwuid(os.geteuid())
        as_user = []
        cache_home = Path(os.environ.get("XDG_CACHE_HOME") or Path(user.pw_dir) / ".cache")
    workdir = cache_home / "kernel-book-unprivileged"
    workdir.mkdir(parents=True, exist_ok=True)
    tree = workdir / "tree"
    copy_working_tree(tree)
    runs = Path(tempfile.mkdtemp(prefix="kernel-book-runs-"))
    if as_user:
        os.chown(cache_home, user.pw_uid, user.pw_gid)
        chown_tree(workdir, user)
        os.chown(runs, user.pw_uid, user.pw_gid)
        (cache_home / "kernel-book").mkdir(exist_ok=True)
        os.chown(cache_home / "kernel-book", user.pw_uid, user.pw_gid)
        seed_cache(cache_home / "kernel-book", user)
    env = {"HOME": user.pw_dir, "USER": user.pw_name, "LOGNAME": user.pw_name,
           "PATH": "/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin", "LANG": "C.UTF-8",
           "XDG_CACHE_HOME": str(cache_home), "KERNEL_BOOK_RUNS": str(runs),
           **{k: os.environ[k] for k in PASSED_ENV if k in os.environ}}
    try:
        yield Developer([*as_user, "env", "-i", *(f"{k}={v}" for k, v in env.items())], tree,
                        cache_home / "kernel-book", runs, user.pw_name)
    finally:
        shutil.rmtree(runs, ignore_errors=True)


def python_version(python: Path) -> str:
    """``platform.python_version()`` of another interpreter."""
    return subprocess.run([str(python), "-c", "import platform; print(platform.python_version())"],
                          capture_output=True, text=True, check=True).stdout.strip()


def test_smoke_as_ordinary_user_with_system_python(developer: Developer, data_unchanged) -> None:
    assert SYSTEM_PYTHON.is_file(), (f"no distribution python3 at {SYSTEM_PYTHON}: this test is "
                                     "about a stock Debian install (apt-get install python3)")
    dev = developer
    proc = subprocess.run(
        [*dev.prefix, "make", "-C", str(dev.tree), "--no-print-directory", "reproduce",
         "CHAPTER=smoke", "REPS=1", "ACCEL=tcg", f"PYTHON={SYSTEM_PYTHON}"],
        text=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, timeout=3000, check=False)
    assert proc.returncode == 0, proc.stdout[-6000:]

    published = [p for p in (dev.runs / "smoke").iterdir() if not p.name.startswith(".")]
    assert len(published) == 1, published
    publish.verify_run(published[0])
    manifest = json.loads((published[0] / "manifest.json").read_text())
    assert manifest["chapter"] == "smoke" and manifest["toolchain_root"]["packages"]
    # the virtual environment, and so every stage, ran on the distribution's interpreter
    assert python_version(dev.tree / ".venv" / "bin" / "python") == \
        python_version(SYSTEM_PYTHON) == manifest["python"]
    # the toolchain root belongs to the user, who can therefore read it (QEMU's 9p server
    # does) and delete it without root
    root = dev.cache / "roots" / manifest["toolchain_root"]["key"]
    foreign = subprocess.run(["find", str(root), "-maxdepth", "3", "!", "-user", dev.user,
                              "-print", "-quit"], capture_output=True, text=True, check=True)
    assert root.is_dir() and foreign.stdout == "", foreign.stdout
    data_unchanged()
