"""Debian's kernel lines (debian = 6.1, debian-6.12) and the names that follow the kernel."""

import pytest

from lab import expect, topology
from lab.errors import UserError
from lab.kernel import debian


@pytest.mark.parametrize(
    ("line", "pkg", "release"),
    [
        ("debian", "linux-image-6.1.0-56-amd64", "6.1.0-56-amd64"),
        ("debian-6.12", "linux-image-6.12.117+deb12-amd64-unsigned", "6.12.117+deb12-amd64"),
        ("debian-6.12", "linux-image-6.12.117+deb12-arm64-unsigned", "6.12.117+deb12-arm64"),
    ],
)
def test_package_names_per_line(line, pkg, release):
    m = debian.line(line).pkg_re.match(pkg)
    assert m and f"{m[1]}-{m[3]}" == release
    other = "debian-6.12" if line == "debian" else "debian"
    assert not debian.line(other).pkg_re.match(pkg)
    # The signed image, the -rt and -cloud flavours and the dbg package are not the line's.
    for name in (pkg.replace("-unsigned", ""), pkg.replace("-amd64", "-rt-amd64"), pkg + "-dbg"):
        if name != pkg:
            assert not debian.line(line).pkg_re.match(name)


def test_unknown_line_is_one_line():
    with pytest.raises(UserError, match="no Debian kernel line 'debian-5.10'"):
        debian.line("debian-5.10")


def test_package_level_follows_the_kernel():
    assert expect.pkg_level("6.1.0-56-amd64") == "DIE"
    assert expect.pkg_level("6.6.9") == "DIE"
    assert expect.pkg_level("6.7.0") == "PKG"
    assert expect.pkg_level("6.12.117+deb12-amd64") == "PKG"
    assert expect.pkg_level(None) == "DIE"
    t = topology.load("zen3-2s-mini")
    doms = expect.expected_domains(t, reclaim_distance=32, cluster_level=False, pkg_name="PKG")[0]
    assert [d.name for d in doms] == ["SMT", "MC", "PKG", "NUMA"]
