"""The architectures a variant's kernel can be built for and booted on, and what each needs.

The host (x86_64) builds in the toolchain root and boots on QEMU's ``pc`` machine with the
root as its guest's ``/``. Any other architecture is a cross build: gcc-15's cross compilers
and C libraries are a layer over the toolchain root (:mod:`lab.pipeline.crosslayer`, so the
root's key, and with it every x86 kernel, stays as it is), clang builds it with the root's own
LLVM, and its guest's ``/`` is the architecture's static busybox, since the toolchain root's
programs cannot run there. Its boots run on QEMU's ``virt`` machine with TCG only: no KVM runs
a foreign architecture's guest.
"""

from __future__ import annotations

from dataclasses import dataclass

from lab.command import StageError


@dataclass(frozen=True)
class Arch:
    """One architecture: how to build its kernel and where to boot it."""

    name: str
    """The name ``chapter.yaml`` uses (``arch:``) and the manifest records (``uname -m``'s)."""
    kernel_arch: str
    """make's ``ARCH=``."""
    image: str
    """The boot image in the build directory."""
    image_target: str
    """The make target that makes it."""
    triplet: str
    """The GNU triplet of gcc's cross compiler (``<triplet>-gcc-15``)."""
    debian: str
    """The Debian architecture of its guest packages."""
    qemu: str
    machine: str
    """QEMU's ``-machine``."""
    console: str
    """The serial console's device name in the guest."""

    @property
    def cross(self) -> bool:
        """Whether building for it is a cross build (it is not the host's)."""
        return self.name != HOST

    def make_vars(self, compiler: str) -> list[str]:
        """make variables of a kernel build with ``compiler`` (gcc or clang), ccache in front
        of the compiler. The host's are those every x86 kernel of the book was built with;
        a cross build adds ``ARCH=`` and, for gcc, the cross compiler's prefix (its
        binutils), while clang takes its target from ``ARCH=`` (``LLVM=`` builds)."""
        if compiler not in ("gcc", "clang"):
            raise StageError(f"unknown compiler {compiler!r}; use gcc or clang")
        if compiler == "clang":
            own = ["LLVM=-21", "CC=ccache clang-21", "HOSTCC=clang-21"]
            return own if not self.cross else [f"ARCH={self.kernel_arch}", *own]
        if not self.cross:
            return ["CC=ccache gcc-15", "HOSTCC=gcc-15", "LD=ld"]
        return [f"ARCH={self.kernel_arch}", f"CROSS_COMPILE={self.triplet}-",
                f"CC=ccache {self.triplet}-gcc-15", "HOSTCC=gcc-15"]

    def tools_cc(self, cc: str) -> str:
        """The compiler of the guest's programs: ``cc`` (the chapter's, ``gcc-15`` unless it
        says) or, on a cross architecture, gcc-15's cross compiler for it."""
        if not self.cross:
            return cc
        if cc != "gcc-15":
            raise StageError(f"tools: cc: {cc} builds no {self.name} programs here; on a "
                             f"cross architecture the guest's programs are built with "
                             f"{self.triplet}-gcc-15 (leave tools: cc: unset)")
        return f"{self.triplet}-gcc-15"


HOST = "x86_64"
ARCHES: dict[str, Arch] = {
    "x86_64": Arch("x86_64", "x86", "arch/x86/boot/bzImage", "bzImage", "x86_64-linux-gnu",
                   "amd64", "qemu-system-x86_64", "pc", "ttyS0"),
    "arm64": Arch("arm64", "arm64", "arch/arm64/boot/Image", "Image", "aarch64-linux-gnu",
                  "arm64", "qemu-system-aarch64", "virt", "ttyAMA0"),
    # highmem=off: a 32-bit kernel without LPAE reaches no PCI window above 4 GiB
    "arm": Arch("arm", "arm", "arch/arm/boot/zImage", "zImage", "arm-linux-gnueabihf",
                "armhf", "qemu-system-arm", "virt,highmem=off", "ttyAMA0"),
}


def get(name: str) -> Arch:
    """The architecture ``name``, or an error naming the ones there are."""
    try:
        return ARCHES[name]
    except KeyError:
        raise StageError(f"unknown architecture {name!r}; use one of {list(ARCHES)}") from None


def cross() -> list[Arch]:
    """The architectures built across (every one but the host's)."""
    return [a for a in ARCHES.values() if a.cross]
