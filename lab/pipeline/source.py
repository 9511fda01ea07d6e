"""The base source: the pinned Linux tree, as a git repository in the cache.

Every chapter starts from the same bytes: Debian's orig tarball of 7.2.13, fetched with apt's
own source download through the private sid configuration (apt checks it against the signed
Sources index), then checked again against the sha256 pinned in ``configs/source.yaml``. It is
unpacked once and committed with a fixed author and date, so the base commit id is the same on
every machine, and variants are commits on top of it.

A reader may bring a tree instead: ``KERNEL_SRC=/path`` (a directory, git or not) or
``KERNEL_TARBALL=/path/linux-x.y.tar.xz``; its sha256 (or git tree id) is recorded instead.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

from lab import ROOT, yamlfile
from lab.command import StageError, require_tools, run
from lab.pipeline import cachedir
from lab.pipeline.apt import PrivateApt, private_apt
from lab.pipeline.stamps import SourceStamp, fresh_log, stage

PIN_FILE = ROOT / "configs" / "source.yaml"
GIT_IDENTITY = {
    "GIT_AUTHOR_NAME": "kernel-book", "GIT_AUTHOR_EMAIL": "pipeline@kernel-book.invalid",
    "GIT_COMMITTER_NAME": "kernel-book", "GIT_COMMITTER_EMAIL": "pipeline@kernel-book.invalid",
    "GIT_AUTHOR_DATE": "2000-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2000-01-01T00:00:00Z",
}
"""Fixed identity and date: the same tree gives the same commit id on every machine."""


@dataclass(frozen=True)
class Base:
    """A base tree ready for series: where it is and what it is."""

    tree: Path
    commit: str
    version: str
    origin: str
    sha256: str

    def to_json(self) -> dict[str, str]:
        """Plain fields for stamps and the manifest."""
        return {k: str(v) for k, v in asdict(self).items()}


def pin(path: Path = PIN_FILE) -> dict:
    """Read the pinned base (package, version, orig tarball name, sha256, fallback package)."""
    return yamlfile.load(path.read_text())


def sha256_file(path: Path) -> str:
    """Hash a file in chunks (tarballs are large)."""
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def git_env() -> dict[str, str]:
    """Environment for git commands that create commits (fixed identity and date)."""
    return {**os.environ, **GIT_IDENTITY}


def verify(tarball: Path, expected: str) -> None:
    """Fail if ``tarball`` is not the pinned file, naming both hashes and the fix."""
    got = sha256_file(tarball)
    if got != expected:
        raise StageError(
            f"{tarball}: sha256 {got} does not match the pinned {expected} "
            f"({PIN_FILE.relative_to(ROOT)}); delete the file and run again to download it anew"
        )


def _fetch_orig(apt: PrivateApt, pinned: dict, work: Path, log: Path) -> Path | None:
    """Try apt's source download of the orig tarball; None if the archive does not serve it."""
    try:
        apt.apt_get("source", "--download-only", "--only-source", "-q",
                    f"{pinned['package']}={pinned['debian_version']}", log=log, cwd=work)
    except StageError:
        return None
    got = work / pinned["orig"]
    return got if got.is_file() else None


def _fetch_linux_source(apt: PrivateApt, pinned: dict, work: Path, log: Path) -> Path:
    """Download linux-source-<ver> with ``apt-get download`` and take its tarball out."""
    ls = pinned["linux_source"]
    apt.apt_get("download", f"{ls['package']}={pinned['debian_version']}", log=log, cwd=work)
    debs = sorted(work.glob(f"{ls['package']}_*.deb"))
    if not debs:
        raise StageError(f"apt-get download left no {ls['package']} .deb in {work}; see {log}")
    out = work / ls["tarball"]
    with out.open("wb") as fh:
        tar = subprocess.Popen(["dpkg-deb", "--fsys-tarfile", debs[0]], stdout=subprocess.PIPE)
        run(["tar", "-xO", ls["member"]], what="extract linux-source tarball",
            stdin=tar.stdout, stdout=fh)
        tar.wait()
    return out


def fetch_base_tarball(log: Path, apt: PrivateApt | None = None, pinned: dict | None = None
                       ) -> tuple[Path, str]:
    """Return the verified base tarball and its kind (``orig`` or ``linux-source``), once.

    The orig tarball is the pin; when the archive in reach answers 404 for the source
    package's files (as some mirrors do for large source packages), the same version's
    linux-source package is used and the manifest says so.
    """
    pinned = pinned or pin()
    ls = pinned["linux_source"]
    store = cachedir.sub("tarballs")
    for name, kind, digest in ((pinned["orig"], "orig", pinned["sha256"]),
                               (ls["tarball"], "linux-source", ls["tarball_sha256"])):
        if (store / name).is_file():
            verify(store / name, digest)
            return store / name, kind
    apt = apt or private_apt()
    apt.update(log=log)
    work = store / "download"
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir()
    got = _fetch_orig(apt, pinned, work, log)
    if got is not None:
        kind, digest = "orig", pinned["sha256"]
    else:
        with log.open("a") as fh:
            fh.write(f"orig tarball not served; falling back to {ls['package']}\n")
        got, kind, digest = _fetch_linux_source(apt, pinned, work, log), "linux-source", \
            ls["tarball_sha256"]
    verify(got, digest)
    dest = store / got.name
    got.rename(dest)
    shutil.rmtree(work)
    return dest, kind


def _commit_tree(tree: Path, log: Path, message: str) -> str:
    env = git_env()
    run(["git", "init", "-q", "-b", "base", str(tree)], log=log, what="git init")
    run(["git", "-C", tree, "config", "core.autocrlf", "false"], log=log)
    run(["git", "-C", tree, "config", "gc.auto", "0"], log=log)
    run(["git", "-C", tree, "add", "-A", "-f"], log=log, env=env, what="git add (base tree)")
    run(["git", "-C", tree, "commit", "-q", "--no-verify", "-m", message], log=log, env=env,
        what="git commit (base tree)")
    run(["git", "-C", tree, "tag", "-f", "kb-base"], log=log)
    return head(tree)


def head(tree: Path, rev: str = "HEAD") -> str:
    """Return the commit id of ``rev`` in ``tree``."""
    return run(["git", "-C", tree, "rev-parse", rev]).stdout.strip()


def _unpack(tarball: Path, dest: Path) -> None:
    """Unpack a kernel tarball into ``dest`` without its top-level directory.

    GNU tar rather than :mod:`tarfile`: ``extractall(filter=...)`` exists only from Python
    3.11.4, and Debian 12's python3 is 3.11.2. tar also refuses absolute and ``..`` member
    names by default, and does not restore the archive's owners (``--no-same-owner``, which
    matters when the pipeline runs as root).
    """
    run(["tar", "-x", "-f", tarball, "-C", dest, "--strip-components=1", "--no-same-owner"],
        what=f"unpack {tarball.name}")
    if not (dest / "Makefile").is_file():
        raise StageError(f"{tarball}: no Makefile in its top-level directory; "
                         "is this a Linux source tarball?")


def _kernel_version(tree: Path) -> str:
    fields = {}
    for line in (tree / "Makefile").read_text().splitlines()[:8]:
        key, _, value = line.partition("=")
        fields[key.strip()] = value.strip()
    return ".".join(x for x in (fields.get("VERSION"), fields.get("PATCHLEVEL"),
                                fields.get("SUBLEVEL")) if x)


def from_tarball(tarball: Path, log: Path, origin: str) -> Base:
    """Unpack ``tarball`` once into the cache as a git repository with one base commit."""
    digest = sha256_file(tarball)
    tree = cachedir.sub("src") / f"tar-{digest[:16]}"
    if not (tree / ".git" / "refs" / "tags" / "kb-base").is_file():
        tmp = tree.with_name(tree.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.rmtree(tree, ignore_errors=True)
        tmp.mkdir(parents=True)
        _unpack(tarball, tmp)
        _commit_tree(tmp, log, f"base: {tarball.name}\n\nsha256 {digest}")
        tmp.rename(tree)
    return Base(tree, head(tree, "kb-base"), _kernel_version(tree), origin, digest)


def from_directory(src: Path, log: Path) -> Base:
    """Import the reader's tree (``KERNEL_SRC``) without ever writing to it.

    A git tree is cloned at its HEAD (``--shared``: no copy of the objects); any other directory
    is copied and committed. The git tree id stands in for the tarball's sha256.
    """
    if not (src / "Makefile").is_file():
        raise StageError(f"KERNEL_SRC={src} has no Makefile; point it at a Linux source tree")
    if (src / ".git").exists():
        rev = head(src)
        tree = cachedir.sub("src") / f"git-{rev[:16]}"
        if not (tree / ".git" / "refs" / "tags" / "kb-base").is_file():
            shutil.rmtree(tree, ignore_errors=True)
            run(["git", "clone", "-q", "--shared", "--no-checkout", src, tree], log=log,
                what="git clone (KERNEL_SRC)")
            run(["git", "-C", tree, "checkout", "-q", "-B", "base", rev], log=log)
            run(["git", "-C", tree, "tag", "-f", "kb-base", rev], log=log)
        ident = run(["git", "-C", tree, "rev-parse", "kb-base^{tree}"]).stdout.strip()
        return Base(tree, head(tree, "kb-base"), _kernel_version(tree), f"git:{src}", ident)
    tree = cachedir.sub("src") / f"dir-{hashlib.sha256(str(src).encode()).hexdigest()[:16]}"
    if not (tree / ".git" / "refs" / "tags" / "kb-base").is_file():
        tmp = tree.with_name(tree.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        shutil.copytree(src, tmp, symlinks=True)
        _commit_tree(tmp, log, f"base: directory {src}")
        tmp.rename(tree)
    ident = run(["git", "-C", tree, "rev-parse", "kb-base^{tree}"]).stdout.strip()
    return Base(tree, head(tree, "kb-base"), _kernel_version(tree), f"dir:{src}", ident)


def prepare(log: Path) -> Base:
    """Return the base tree the environment asks for: KERNEL_SRC, KERNEL_TARBALL or the pin."""
    if os.environ.get("KERNEL_SRC"):
        return from_directory(Path(os.environ["KERNEL_SRC"]).resolve(), log)
    if os.environ.get("KERNEL_TARBALL"):
        tarball = Path(os.environ["KERNEL_TARBALL"]).resolve()
        if not tarball.is_file():
            raise StageError(f"KERNEL_TARBALL={tarball} does not exist")
        return from_tarball(tarball, log, f"tarball:{tarball.name}")
    pinned = pin()
    tarball, kind = fetch_base_tarball(log, pinned=pinned)
    base = from_tarball(tarball, log, f"debian-{kind}:{pinned['debian_version']}")
    if base.version != pinned["version"]:
        raise StageError(f"{tarball} unpacked to version {base.version}, pinned "
                         f"{pinned['version']} in {PIN_FILE}")
    return base


def cmd_source(a: argparse.Namespace) -> None:
    """Fetch, verify and unpack the base tree (or take KERNEL_SRC / KERNEL_TARBALL)."""
    log = fresh_log(a)
    with stage("source", "base tree", log):
        require_tools(["git", "apt-get", "dpkg-deb"])
        stamp = SourceStamp(**prepare(log).to_json())
    stamp.write(a.out)
