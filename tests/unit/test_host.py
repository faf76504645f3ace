"""host.py: parsers and delta math on real text copied from a Linux 6.18 VM, and the real /proc
and /sys of the machine running the tests (no mocks of the kernel)."""

from __future__ import annotations

import dataclasses
import errno
import mmap
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from openslob.host import counters as host_counters
from openslob.host import devices as host_devices
from openslob.host import procfs as host_procfs
from openslob.host import snapshot as host_snapshot

# Real lines from this machine's /proc/diskstats, a few seconds apart (kernel 6.18: 17 fields,
# discards and flushes included), plus a loop device and an old 14-field kernel line.
DISKSTATS_BEFORE = """\
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 485970 12385 35694322 51656 1302568 67566 29571008 97428 0 72660 156994 \
81067 39 11651400 5419 76780 2490
 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
   8       0 sda 1000 10 8000 500 2000 20 16000 900 0 1200 1400
"""
DISKSTATS_AFTER = """\
   7       0 loop0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
 254       0 vda 486066 12441 35698018 51696 1302571 67566 29571040 97428 0 72672 157035 \
81072 39 11651448 5420 76800 2530
 253       0 zram0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0
   8       0 sda 1100 10 8800 600 2000 20 16000 900 1 1300 1500
"""

PROC_STAT_BEFORE = """\
cpu  10768 0 23046 851108 4951 0 677 14 0 0
cpu0 2412 0 5326 436828 1001 0 50 3 0 0
cpu1 8355 0 17719 414279 3950 0 626 10 0 0
intr 2327202 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 0 1 1 15 0 0 0 0 917 136
ctxt 4672367
btime 1795319226
processes 10680
procs_running 4
procs_blocked 0
softirq 1897946 0 73408 4 7533 1539223 0 2 140416 0 137360
"""
# +100 user, +50 system, +800 idle, +40 iowait, +10 softirq = 1000 jiffies; +5000 ctxt
PROC_STAT_AFTER = """\
cpu  10868 0 23096 851908 4991 0 687 14 0 0
cpu0 2462 0 5351 437228 1021 0 55 3 0 0
cpu1 8405 0 17744 414679 3970 0 631 10 0 0
ctxt 4677367
procs_running 1
"""

PSI_IO_BEFORE = """\
some avg10=0.37 avg60=5.02 avg300=7.06 total=46491254
full avg10=0.37 avg60=4.51 avg300=6.24 total=40983198
"""
PSI_IO_AFTER = """\
some avg10=4.80 avg60=5.10 avg300=7.01 total=46741254
full avg10=1.90 avg60=4.40 avg300=6.20 total=41083198
"""
PSI_CPU = """\
some avg10=0.37 avg60=2.01 avg300=2.70 total=24056493
full avg10=0.00 avg60=0.00 avg300=0.00 total=0
"""

# A real /proc/PID/stat line with its comm replaced by one built to fool naive splitting
PID_STAT_EVIL = (
    "10452 (evil) R 1 2 (x y) S 10431 10431 10031 0 -1 4194304 102 0 0 0 7 3 11 13 20 0 1 0 "
    "447300 3133440 418 18446744073709551615 94822258221056 94822258240937 140730529752800 "
    "0 0 0 0 0 0 0 0 0 17 0 0 0 0 0 0 94822258256944 94822258258560 94822429544448 "
    "140730529757681 140730529757701 140730529757701 140730529759211 0\n"
)


# ----------------------------------------------------------------------------- parsers


def test_parse_diskstats_fields() -> None:
    disks = host_counters.parse_diskstats(DISKSTATS_BEFORE)
    assert set(disks) == {"loop0", "vda", "zram0", "sda"}
    vda = disks["vda"]
    assert (vda.reads, vda.reads_merged, vda.sectors_read, vda.read_ms) == (
        485970,
        12385,
        35694322,
        51656,
    )
    assert (vda.writes, vda.sectors_written, vda.write_ms) == (1302568, 29571008, 97428)
    assert (vda.in_flight, vda.io_ms, vda.weighted_ms) == (0, 72660, 156994)
    assert (vda.discards, vda.sectors_discarded, vda.discard_ms) == (81067, 11651400, 5419)
    assert (vda.flushes, vda.flush_ms) == (76780, 2490)
    # a pre-4.18 kernel: no discard nor flush fields
    assert disks["sda"].discards is None and disks["sda"].flushes is None


def test_disk_delta_hand_computed() -> None:
    before = host_counters.parse_diskstats(DISKSTATS_BEFORE)["vda"]
    after = host_counters.parse_diskstats(DISKSTATS_AFTER)["vda"]
    rates = host_counters.disk_delta(before, after, 2.0)
    # 96 reads, 3696 sectors, 40 ms; 3 writes, 32 sectors, 0 ms; 12 ms busy, 41 ms in queue
    assert rates.reads_per_s == 48.0
    assert rates.writes_per_s == 1.5
    assert rates.read_mb_per_s == pytest.approx(3696 * 512 / 2**20 / 2)
    assert rates.write_mb_per_s == pytest.approx(32 * 512 / 2**20 / 2)
    assert rates.read_latency_us == pytest.approx(40 * 1000 / 96)  # 416.7 µs, not "0 ms"
    assert rates.write_latency_us == 0.0  # measured: 3 writes took < 1 ms in total
    assert rates.avg_read_kb == pytest.approx(19.25)
    assert rates.avg_write_kb == pytest.approx(32 * 512 / 1024 / 3)  # 5.3 KiB
    assert rates.util_pct == pytest.approx(12 / 2000 * 100)
    assert rates.avg_queue == pytest.approx(41 / 2000)
    assert rates.flushes_per_s == 10.0  # 20 flushes in 2 s
    assert rates.flush_latency_us == pytest.approx(40 * 1000 / 20)


def test_latency_is_none_without_ops() -> None:
    loop = host_counters.parse_diskstats(DISKSTATS_BEFORE)["loop0"]
    rates = host_counters.disk_delta(loop, loop, 1.0)
    assert rates.reads_per_s == 0.0 and rates.writes_per_s == 0.0
    assert rates.read_latency_us is None and rates.write_latency_us is None
    assert rates.avg_read_kb is None and rates.avg_write_kb is None
    assert rates.flush_latency_us is None


def test_flushes_none_on_old_kernel() -> None:
    before = host_counters.parse_diskstats(DISKSTATS_BEFORE)["sda"]
    after = host_counters.parse_diskstats(DISKSTATS_AFTER)["sda"]
    rates = host_counters.disk_delta(before, after, 1.0)
    assert rates.flushes_per_s is None and rates.flush_latency_us is None
    assert rates.read_latency_us == pytest.approx(100 * 1000 / 100)


def _counters(
    reads: int, read_ms: int, io_ms: int = 0, weighted_ms: int = 0
) -> host_counters.DiskCounters:
    return host_counters.DiskCounters(
        reads, 0, reads * 16, read_ms, 0, 0, 0, 0, 0, io_ms, weighted_ms
    )


def test_multi_device_latency_is_weighted_by_ops() -> None:
    zero = _counters(0, 0)
    before = {"a": zero, "b": zero, "c": zero}
    # a: 100 reads at 1000 µs; b: 900 reads at 100 µs; c is not asked for
    after = {
        "a": _counters(100, 100, io_ms=500, weighted_ms=100),
        "b": _counters(900, 90, io_ms=300, weighted_ms=90),
        "c": _counters(5, 5000),
    }
    rates = host_counters.sum_disk_delta(before, after, 1.0, ["a", "b"])
    assert rates is not None
    assert rates.reads_per_s == 1000.0
    assert rates.read_latency_us == pytest.approx(190.0)  # 190 ms / 1000 reads, not 550
    assert rates.util_pct == pytest.approx(50.0)  # the busiest device
    assert rates.avg_queue == pytest.approx(0.19)
    assert host_counters.sum_disk_delta(before, after, 1.0, ["missing"]) is None


def test_counter_wrap_and_reset() -> None:
    assert host_counters.counter_delta(2**32 - 6, 5) == 11  # a 32-bit ms field wrapped
    assert host_counters.counter_delta(2**40, 10) == 10  # a 64-bit counter went back: device reset
    before = _counters(10, 2**32 - 1000)
    after = _counters(20, 1000)
    rates = host_counters.disk_delta(before, after, 1.0)
    assert rates.read_latency_us == pytest.approx(2000 * 1000 / 10)


def test_disk_delta_rejects_empty_window() -> None:
    zero = _counters(0, 0)
    with pytest.raises(ValueError):
        host_counters.disk_delta(zero, zero, 0.0)


def test_parse_proc_stat_and_cpu_delta() -> None:
    before = host_counters.parse_proc_stat(PROC_STAT_BEFORE)
    after = host_counters.parse_proc_stat(PROC_STAT_AFTER)
    assert before.cpus == 2
    assert before.cpu.user == 10768 and before.cpu.system == 23046 and before.cpu.steal == 14
    assert before.ctxt == 4672367 and before.procs_running == 4
    rates = host_counters.cpu_delta(before, after, seconds=5.0)
    assert rates.user_pct == pytest.approx(10.0)
    assert rates.sys_pct == pytest.approx(6.0)  # system 50 + softirq 10
    assert rates.iowait_pct == pytest.approx(4.0)
    assert rates.idle_pct == pytest.approx(80.0)
    assert rates.steal_pct == 0.0
    assert rates.busy_pct == pytest.approx(16.0)
    assert rates.cpus == 2
    assert rates.context_switches_per_s == pytest.approx(1000.0)


def test_cpu_delta_unmeasurable() -> None:
    stat = host_counters.parse_proc_stat(PROC_STAT_BEFORE)
    rates = host_counters.cpu_delta(stat, stat)
    assert rates.busy_pct is None and rates.idle_pct is None
    assert rates.context_switches_per_s is None
    old = host_counters.parse_proc_stat("cpu  1 2 3 4 5 6 7\ncpu0 1 2 3 4 5 6 7\n")
    assert old.cpu.steal is None
    assert host_counters.cpu_delta(old, old).steal_pct is None
    with pytest.raises(ValueError):
        host_counters.parse_proc_stat("ctxt 1\n")


def test_pressure_parse_and_delta() -> None:
    io = host_counters.parse_pressure(PSI_IO_BEFORE)
    assert io["some"] == host_counters.PressureLine(0.37, 5.02, 7.06, 46491254)
    assert io["full"].total_us == 40983198
    before = {"io": io, "cpu": host_counters.parse_pressure(PSI_CPU)}
    after = {
        "io": host_counters.parse_pressure(PSI_IO_AFTER),
        "cpu": host_counters.parse_pressure(PSI_CPU),
    }
    psi = host_counters.pressure_delta(before, after, 5.0)
    assert psi is not None
    assert psi["io"]["some"] == pytest.approx(5.0)  # 250,000 µs of 5 s
    assert psi["io"]["full"] == pytest.approx(2.0)
    assert psi["cpu"]["some"] == 0.0
    assert psi["memory"] == {"some": None, "full": None}  # not read: unmeasured, not 0
    assert host_counters.pressure_delta(None, after, 5.0) is None


def test_parse_pid_stat_comm_with_parentheses() -> None:
    st = host_counters.parse_pid_stat(PID_STAT_EVIL)
    assert st.pid == 10452
    assert st.comm == "evil) R 1 2 (x y"
    assert (st.state, st.ppid) == ("S", 10431)
    assert (st.utime, st.stime, st.cutime, st.cstime) == (7, 3, 11, 13)


def test_parse_mountinfo_escapes() -> None:
    text = (
        "27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard\n"
        "36 35 98:0 /mnt1 /mnt\\040with\\040space rw shared:1 - ext3 /dev/root rw\n"
    )
    assert host_devices.parse_mountinfo(text) == [
        ("/", "ext4", "/dev/vda"),
        ("/mnt with space", "ext3", "/dev/root"),
    ]


def test_parse_meminfo_os_release_cpu_model() -> None:
    mem = host_snapshot.parse_meminfo("MemTotal:       24684092 kB\nHugePages_Total:       0\n")
    assert mem == {"MemTotal": 24684092 * 1024, "HugePages_Total": 0}
    osr = host_snapshot.parse_os_release(
        'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nID=debian\n'
    )
    assert osr["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)" and osr["ID"] == "debian"
    assert host_snapshot.parse_cpu_model("processor\t: 0\nmodel name\t: AMD EPYC\n") == "AMD EPYC"
    assert host_snapshot.parse_cpu_model("processor\t: 0\n") is None


def test_snapshot_from_text_and_host_delta() -> None:
    before = host_snapshot.snapshot_from_text(
        100.0, "t0", ["vda"], DISKSTATS_BEFORE, PROC_STAT_BEFORE, {"io": PSI_IO_BEFORE}, 10.0
    )
    after = host_snapshot.snapshot_from_text(
        102.0, "t1", ["vda"], DISKSTATS_AFTER, PROC_STAT_AFTER, {"io": PSI_IO_AFTER}, 11.5
    )
    assert set(before.disks) == {"vda"}
    m = host_snapshot.host_delta(before, after)
    assert m["device_reads_per_s"] == 48.0
    assert m["device_read_latency_us"] == pytest.approx(40 * 1000 / 96)
    assert m["cpu_user_pct"] == pytest.approx(10.0)
    assert m["cpu_iowait_pct"] == pytest.approx(4.0)
    assert m["server_cpu_seconds"] == pytest.approx(1.5)
    assert m["server_cpu_pct"] == pytest.approx(1.5 / (2.0 * 2) * 100)
    assert m["psi_io_some_pct"] == pytest.approx(12.5)  # 250 ms of 2 s
    assert m["psi_cpu_some_pct"] is None  # cpu pressure not read here


def test_host_delta_unmeasurable_is_none() -> None:
    before = host_snapshot.snapshot_from_text(
        0.0, "t0", [], DISKSTATS_BEFORE, PROC_STAT_BEFORE, None
    )
    after = host_snapshot.snapshot_from_text(1.0, "t1", [], DISKSTATS_AFTER, PROC_STAT_AFTER, None)
    m = host_snapshot.host_delta(before, after)
    device_keys = [k for k in m if k.startswith("device_")]
    assert device_keys and all(m[k] is None for k in device_keys)
    assert m["server_cpu_seconds"] is None and m["server_cpu_pct"] is None
    assert all(m[k] is None for k in m if k.startswith("psi_"))
    assert m["cpu_busy_pct"] == pytest.approx(16.0)
    with pytest.raises(ValueError):
        host_snapshot.host_delta(after, before)


# ----------------------------------------------------------------------------- this machine


@pytest.fixture()
def var_tmp_dir() -> Iterator[Path]:
    # /var/tmp, not /tmp: more often on a real disk than on tmpfs
    with tempfile.TemporaryDirectory(dir="/var/tmp", prefix="openslob-host-") as d:
        yield Path(d)


def _devices_or_skip(path: Path) -> list[str]:
    names = host_devices.devices_for_path(path)
    if not names:
        pytest.skip(f"{path} is not on a block device here")
    return names


def test_devices_for_path_are_in_diskstats(var_tmp_dir: Path) -> None:
    names = _devices_or_skip(var_tmp_dir)
    known = host_counters.read_diskstats().devices
    assert all(n in known for n in names)
    for info in host_devices.describe_devices(names):
        assert info["name"] in names
        assert info["size_bytes"] and info["size_bytes"] > 0
        assert info["logical_block_size"] in (512, 1024, 2048, 4096)
        assert info["rotational"] in (True, False, None)
        assert isinstance(info["slaves"], list)


def test_devices_for_path_on_pseudo_file_systems() -> None:
    assert host_devices.devices_for_path("/proc") == []
    assert host_devices.devices_for_path("/sys") == []


def _write_32_mib(path: Path) -> int:
    size, chunk = 32 * 2**20, 2**20
    buf = mmap.mmap(-1, chunk)  # page-aligned, as O_DIRECT requires
    buf.write(os.urandom(chunk))
    flags = os.O_WRONLY | os.O_CREAT | os.O_SYNC
    try:
        fd = os.open(path, flags | os.O_DIRECT, 0o600)
    except OSError as exc:
        if exc.errno != errno.EINVAL:
            raise
        fd = os.open(path, flags, 0o600)  # file system without direct I/O
    try:
        for _ in range(size // chunk):
            assert os.write(fd, buf) == chunk
        os.fsync(fd)
    finally:
        os.close(fd)
    return size


def test_written_bytes_show_in_device_counters(var_tmp_dir: Path) -> None:
    names = _devices_or_skip(var_tmp_dir)
    before = host_snapshot.take_snapshot(names)
    written = _write_32_mib(var_tmp_dir / "data")
    after = host_snapshot.take_snapshot(names)
    writes = sum(after.disks[n].writes - before.disks[n].writes for n in names)
    sectors = sum(after.disks[n].sectors_written - before.disks[n].sectors_written for n in names)
    assert writes >= 1
    assert sectors * host_procfs.SECTOR_BYTES >= written
    m = host_snapshot.host_delta(before, after)
    seconds = after.monotonic - before.monotonic
    assert m["device_write_mb_per_s"] >= written / 2**20 / seconds * 0.999
    assert m["device_write_latency_us"] is not None and m["device_write_latency_us"] >= 0
    assert m["device_writes_per_s"] > 0


def test_a_runs_host_reader_reads_its_open_files_afresh(
    var_tmp_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """LocalHost keeps /proc's files open for a run: each call must read them anew (the
    written bytes show), the whole of a file longer than one read, only the run's devices,
    and close() must give the descriptors back."""
    names = _devices_or_skip(var_tmp_dir)
    fds_before = set(os.listdir("/proc/self/fd"))
    reader = host_snapshot.LocalHost([*names, "no-such-device"])
    monkeypatch.setattr(host_snapshot, "PREAD_BYTES", 7)  # every file in many pieces
    before = reader()
    assert set(before.disks) == set(names)
    fresh = host_snapshot.take_snapshot(names)
    assert before.proc_stat.cpus == fresh.proc_stat.cpus
    assert (before.pressure is None) == (fresh.pressure is None)
    written = _write_32_mib(var_tmp_dir / "data")
    after = reader()
    sectors = sum(after.disks[n].sectors_written - before.disks[n].sectors_written for n in names)
    assert sectors * host_procfs.SECTOR_BYTES >= written
    assert after.proc_stat.ctxt > before.proc_stat.ctxt
    assert after.client_cpu_seconds >= before.client_cpu_seconds
    m = host_snapshot.host_delta(before, after)
    assert m["device_writes_per_s"] > 0 and m["cpu_busy_pct"] is not None
    assert len(set(os.listdir("/proc/self/fd")) - fds_before) >= 2  # kept open
    reader.close()
    assert set(os.listdir("/proc/self/fd")) == fds_before


def test_a_runs_host_reader_without_a_file() -> None:
    """A /proc file the reader cannot open is None from then on (no PSI); /proc/stat or
    /proc/diskstats missing is an error, as for take_snapshot."""
    reader = host_snapshot.LocalHost([])
    assert reader._text("pressure/no-such-resource") is None
    assert reader._fds["pressure/no-such-resource"] is None
    reader._fds["stat"] = None
    with pytest.raises(OSError, match="/proc/stat"):
        reader()
    reader.close()


def test_a_runs_host_reader_tries_again_after_a_passing_error() -> None:
    """An error that does not mean "no such file" (here EBADF, a descriptor gone) fails
    that read only: the file is opened again at the next one."""
    reader = host_snapshot.LocalHost([])
    first = reader()
    spare = os.open("/dev/null", os.O_RDONLY)
    os.close(spare)  # a descriptor number no longer open
    reader._fds["stat"] = spare
    with pytest.raises(OSError, match="/proc/stat"):
        reader()
    assert reader._fds["stat"] == -1
    again = reader()
    assert again.proc_stat.ctxt >= first.proc_stat.ctxt and isinstance(reader._fds["stat"], int)
    reader.close()


BUSY_CHILD = """
import sys, time
print("ready", flush=True)
sys.stdin.readline()
end = time.process_time() + 0.3
while time.process_time() < end:
    pass
print("done", flush=True)
sys.stdin.readline()
"""


def test_busy_child_shows_in_process_and_host_cpu() -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", BUSY_CHILD], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert child.stdin is not None and child.stdout is not None
    try:
        assert child.stdout.readline() == "ready\n"
        assert child.pid in host_counters.children_of(os.getpid())
        before = host_snapshot.take_snapshot([])
        cpu_before = host_counters.process_cpu_seconds([child.pid])
        child.stdin.write("go\n")
        child.stdin.flush()
        assert child.stdout.readline() == "done\n"
        cpu_after = host_counters.process_cpu_seconds([child.pid])
        after = host_snapshot.take_snapshot([])
    finally:
        child.stdin.close()
        child.wait(timeout=10)
    # 0.3 s of CPU (process_time, so contention cannot shrink it), counted in clock ticks
    assert cpu_after - cpu_before >= 0.2
    rates = host_counters.cpu_delta(before.proc_stat, after.proc_stat)
    seconds = after.monotonic - before.monotonic
    assert rates.busy_pct is not None
    assert rates.busy_pct >= 0.2 / (seconds * rates.cpus) * 100
    assert host_counters.process_cpu_seconds([child.pid]) == 0.0  # gone: skipped, no error


def test_reaped_children_count_in_server_cpu() -> None:
    me = os.getpid()
    tree_before = host_counters.server_cpu_seconds(me)
    assert tree_before is not None
    code = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", code], check=True)  # exits and is waited for
    tree_after = host_counters.server_cpu_seconds(me)
    assert tree_after is not None and tree_after - tree_before >= 0.2
    assert me in host_counters.process_tree(me)


def test_missing_process() -> None:
    pid = 2**22 + 1  # above the kernel's pid_max limit: can never exist
    assert host_counters.read_pid_stat(pid) is None
    assert host_counters.process_tree(pid) == []
    assert host_counters.server_cpu_seconds(pid) is None
    assert host_counters.process_cpu_seconds([pid]) == 0.0


def test_take_snapshot_real(var_tmp_dir: Path) -> None:
    names = host_devices.devices_for_path(var_tmp_dir)
    snap = host_snapshot.take_snapshot(names, server_pid=os.getpid())
    assert set(snap.disks) == set(names)
    assert datetime.fromisoformat(snap.wall_time).tzinfo == UTC
    assert snap.server_cpu_seconds is not None and snap.server_cpu_seconds > 0
    assert snap.proc_stat.cpus >= 1
    time.sleep(0.05)
    later = host_snapshot.take_snapshot(names, server_pid=os.getpid())
    m = host_snapshot.host_delta(snap, later)
    assert m["server_cpu_seconds"] is not None and m["server_cpu_seconds"] >= 0
    if snap.pressure is None:
        assert m["psi_io_some_pct"] is None
    else:
        assert 0 <= m["psi_io_some_pct"] <= 100
    no_psi = host_snapshot.host_delta(
        dataclasses.replace(snap, pressure=None), dataclasses.replace(later, pressure=None)
    )
    assert no_psi["psi_io_some_pct"] is None and no_psi["psi_memory_some_pct"] is None


def test_read_pressure_real() -> None:
    psi = host_counters.read_pressure()
    if not Path("/proc/pressure").exists():
        assert psi is None
        return
    assert psi is not None and "io" in psi
    assert psi["io"]["some"].total_us >= 0


def test_host_info_real(var_tmp_dir: Path) -> None:
    info = host_snapshot.host_info(var_tmp_dir)
    assert info["hostname"]
    assert info["cpus"] >= 1
    assert info["memory_bytes"] > 0
    assert info["kernel"] == os.uname().release
    assert isinstance(info["devices"], list)
    assert [d["name"] for d in info["devices"]] == host_devices.devices_for_path(var_tmp_dir)


MOUNTINFO = """\
22 1 254:0 / / rw,relatime - ext4 /dev/vda rw
40 22 8:17 / /srv/pg rw,noatime - xfs /dev/sdb1 rw
41 40 0:45 / /srv/pg/btr rw - btrfs /dev/nvme0n1p2 rw
42 22 0:46 / /srv/pg\\040space rw - ext4 /dev/sdc rw
"""
DISKSTATS = """\
 254       0 vda 1 0 8 1 1 0 8 1 0 1 2 0 0 0 0 0 0
   8      16 sdb 1 0 8 1 1 0 8 1 0 1 2 0 0 0 0 0 0
   8      17 sdb1 1 0 8 1 1 0 8 1 0 1 2 0 0 0 0 0 0
 259       2 nvme0n1p2 1 0 8 1 1 0 8 1 0 1 2 0 0 0 0 0 0
"""


@pytest.mark.parametrize(
    ("path", "devices"),
    [
        ("/srv/pg/18/main", ["sdb1"]),  # the longest mount point, matched by major:minor
        ("/srv/pgx", ["vda"]),  # a prefix of a name is not a parent directory
        ("/srv/pg/btr/data", ["nvme0n1p2"]),  # anonymous 0:N: the source names the device
        ("/srv/pg space/data", []),  # escaped mount point; its device is not in diskstats
        ("/var/lib/postgresql", ["vda"]),
    ],
)
def test_devices_from_another_hosts_proc(path: str, devices: list[str]) -> None:
    from openslob.host.devices import devices_from_texts

    assert devices_from_texts(path, MOUNTINFO, DISKSTATS) == devices


def test_a_threads_cpu_is_its_own_not_its_processs() -> None:
    """A server thread's CPU (MariaDB's monitor connections) is read from its own task
    entry: /proc/TID/stat of a thread would give its whole process's."""
    import threading

    tid: list[int] = []
    spun, done = threading.Event(), threading.Event()

    def spin() -> None:
        tid.append(threading.get_native_id())
        end = time.process_time() + 0.3  # this process's CPU: the spinning thread's here
        while time.process_time() < end:
            pass
        spun.set()
        done.wait(10)

    me = os.getpid()
    worker = threading.Thread(target=spin)
    mine = time.thread_time()  # the main thread's own CPU meanwhile (a GC pass may take some)
    before = host_snapshot.tasks_cpu_seconds([me])[me]
    worker.start()
    assert spun.wait(10)
    seen = host_snapshot.tasks_cpu_seconds([tid[0], me])
    mine = time.thread_time() - mine
    done.set()
    worker.join()
    # join returns when the Python thread is done; the kernel task may linger a moment
    gone_by = time.monotonic() + 2
    while os.path.exists(f"/proc/{me}/task/{tid[0]}") and time.monotonic() < gone_by:
        time.sleep(0.01)
    assert seen[tid[0]] >= 0.2, seen  # the worker's own time
    # the main thread's, without the worker's 0.3 s
    assert seen[me] - before < mine + 0.15, (seen, before, mine)
    assert host_snapshot.tasks_cpu_seconds([tid[0]]) == {}  # gone: left out, not 0


def test_a_tasks_cpu_is_read_to_the_microsecond_not_in_clock_ticks() -> None:
    """A monitor's query is ~1 ms of CPU: counted in 10 ms clock ticks, a 10 s window read
    its monitors' CPU as 0, 1 or 2 ms a second of the same work. 5 ms spun by a thread that
    sleeps before and after (as a monitor's backend does between its queries) must read as
    5 ms by its own clock, not 0 or 10."""
    go, spun, done = threading.Event(), threading.Event(), threading.Event()
    own: list[float] = []

    def spin() -> None:
        go.wait(10)
        mine = time.thread_time()
        while time.thread_time() - mine < 0.005:
            pass
        own.append(time.thread_time() - mine)
        spun.set()
        done.wait(10)

    def asleep(task: int) -> None:  # a running task's figure lags by up to a tick
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            stat = (host_procfs.PROC / f"self/task/{task}/stat").read_text()
            if stat.rpartition(")")[2].split()[0] == "S":
                return
            time.sleep(0.001)
        raise AssertionError(f"task {task} never slept")

    worker = threading.Thread(target=spin)
    worker.start()
    try:
        task = worker.native_id or 0
        asleep(task)  # waiting for `go`
        before = host_snapshot.tasks_cpu_seconds([task])[task]
        go.set()
        assert spun.wait(10)
        asleep(task)  # and for `done`
        spent = host_snapshot.tasks_cpu_seconds([task])[task] - before
    finally:
        done.set()
        worker.join()
    assert spent == pytest.approx(own[0], abs=0.0005), (spent, own)


def test_tasks_cpu_delta_counts_the_tasks_read_at_both_ends() -> None:
    before = {10: 1.0, 11: 2.0, 12: 5.0}
    after = {10: 1.5, 11: 2.25, 13: 9.0}  # 12 gone, 13 new: neither counted
    assert host_snapshot.tasks_cpu_delta(before, after) == (0.75, 2)
    assert host_snapshot.tasks_cpu_delta(None, after) == (None, 0)
    assert host_snapshot.tasks_cpu_delta({12: 1.0}, {13: 1.0}) == (None, 0)
