"""The shaledb package: every method, the error mapping, iterators, snapshots, batches (atomic across a kill -9
of the writer), threads, a read-only open beside a writer. Run by scripts/python-tests."""
import ast
import os
import pathlib
import random
import signal
import struct
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import shaledb

U64 = struct.Struct("<Q")


@pytest.fixture
def path(tmp_path):
    return str(tmp_path / "db")


@pytest.fixture
def db(path):
    d = shaledb.DB(path)
    yield d
    d.close()


def fill(db, n, prefix=b"k"):
    for i in range(n):
        db[prefix + b"%04d" % i] = b"v%d" % i


# ---------------------------------------------------------------- mapping protocol, get/put/delete/merge


def test_mapping_protocol(db):
    db[b"a"] = b"1"
    assert db[b"a"] == b"1"
    assert b"a" in db
    assert b"b" not in db
    with pytest.raises(KeyError):
        db[b"b"]
    del db[b"a"]
    assert b"a" not in db
    del db[b"never-there"]  # deleting an absent key is not an error
    fill(db, 3)
    assert list(db) == [b"k0000", b"k0001", b"k0002"]


def test_get_put_delete(db):
    assert db.get(b"x") is None
    assert db.get(b"x", b"dflt") == b"dflt"
    db.put(b"x", b"1")
    db.put(b"y", b"2", sync=True)
    assert db.get(b"x", b"dflt") == b"1"
    assert db.get(b"y") == b"2"
    db.delete(b"x")
    db.delete(b"y", sync=True)
    assert db.get(b"x") is None and db.get(b"y") is None
    db.put(b"", b"")  # empty key and value are legal
    assert db.get(b"") == b""
    db.put(b"big", b"\x00\xff" * 50_000)
    assert db.get(b"big") == b"\x00\xff" * 50_000


def test_bytearray_is_accepted(db):
    db.put(bytearray(b"ba"), bytearray(b"val"))
    assert db[bytearray(b"ba")] == b"val"


@pytest.mark.parametrize(
    "call",
    [
        lambda db: db.put("k", b"v"),
        lambda db: db.put(b"k", "v"),
        lambda db: db.get("k"),
        lambda db: db.delete("k"),
        lambda db: db.merge("k", b"v"),
        lambda db: db.__setitem__("k", b"v"),
        lambda db: db["k"],
        lambda db: "k" in db,
        lambda db: db.multi_get(["k"]),
        lambda db: db[["k"]],
        lambda db: db.iterator(start="a"),
        lambda db: db.keys(prefix="a"),
        lambda db: db.compact_range("a", None),
        lambda db: db.write_batch().put("k", b"v"),
        lambda db: db.put(1, b"v"),
        lambda db: db.put(None, b"v"),
    ],
)
def test_str_and_other_types_are_refused_with_type_error(db, call):
    with pytest.raises(TypeError, match="must be bytes"):
        call(db)


def test_type_error_says_to_encode(db):
    with pytest.raises(TypeError, match=r"not str: encode it"):
        db.put("k", b"v")


def test_merge_operators_by_name(path):
    opts = shaledb.Options(merge_operator="uint64add")
    with shaledb.DB(path, opts) as db:
        db.merge(b"hits", U64.pack(2))
        db.merge(b"hits", U64.pack(3), sync=True)
        assert U64.unpack(db[b"hits"])[0] == 5
    with shaledb.DB(path, shaledb.Options(merge_operator="uint64add")) as db:
        assert U64.unpack(db[b"hits"])[0] == 5
    other = path + "-append"
    with shaledb.DB(other, shaledb.Options(merge_operator="stringappend:|")) as db:
        db.put(b"k", b"a")
        db.merge(b"k", b"b")
        db.merge(b"k", b"c")
        assert db[b"k"] == b"a|b|c"


def test_merge_without_operator_is_invalid_argument(db):
    with pytest.raises(shaledb.InvalidArgument, match="merge_operator"):
        db.merge(b"k", b"v")


def test_delete_range(db):
    fill(db, 10)
    db.delete_range(b"k0002", b"k0005")
    assert list(db.keys()) == [b"k0000", b"k0001"] + [b"k%04d" % i for i in range(5, 10)]


# ---------------------------------------------------------------- multi_get


def test_multi_get_and_list_index(db):
    db[b"a"] = b"1"
    db[b"c"] = b"3"
    assert db.multi_get([b"a", b"b", b"c"]) == [b"1", None, b"3"]
    assert db[[b"a", b"b", b"c"]] == [b"1", None, b"3"]
    assert db[(b"c",)] == [b"3"]
    assert db.multi_get([]) == []
    assert db.multi_get(iter([b"a"])) == [b"1"]
    with pytest.raises(TypeError, match="list of bytes keys"):
        db.multi_get(b"a")


# ---------------------------------------------------------------- write batches


def test_write_batch_commits_on_exit(db):
    with db.write_batch() as b:
        b.put(b"a", b"1")
        b[b"b"] = b"2"
        b.put(b"c", b"3")
        del b[b"c"]
        assert len(b) == 4
        assert b.size > 0
        assert db.get(b"a") is None  # nothing visible before the commit
    assert db[[b"a", b"b", b"c"]] == [b"1", b"2", None]


def test_write_batch_is_discarded_on_exception(db):
    with pytest.raises(RuntimeError):
        with db.write_batch() as b:
            b.put(b"a", b"1")
            raise RuntimeError("boom")
    assert db.get(b"a") is None


def test_write_batch_merge_delete_range_clear_and_sync(path):
    with shaledb.DB(path, shaledb.Options(merge_operator="uint64add")) as db:
        fill(db, 5)
        with db.write_batch(sync=True) as b:
            b.merge(b"n", U64.pack(7))
            b.delete_range(b"k0000", b"k0003")
            b.put(b"gone", b"x")
            b.clear()
            assert len(b) == 0
            b.merge(b"n", U64.pack(7))
            b.delete_range(b"k0000", b"k0003")
        assert U64.unpack(db[b"n"])[0] == 7
        assert list(db.keys(prefix=b"k")) == [b"k0003", b"k0004"]


def test_free_write_batch_and_db_write(db):
    b = shaledb.WriteBatch()
    b.put(b"a", b"1")
    b.delete(b"b")
    db[b"b"] = b"x"
    db.write(b)
    assert db.get(b"a") == b"1" and db.get(b"b") is None
    assert len(b) == 0  # written batches are emptied
    db.write(shaledb.WriteBatch(), sync=True)  # an empty batch is a no-op
    with pytest.raises(ValueError, match="db.write"):
        shaledb.WriteBatch().commit()
    with pytest.raises(shaledb.Error, match="write_batch"):
        with shaledb.WriteBatch():
            pass


def test_explicit_commit(db):
    b = db.write_batch()
    b.put(b"a", b"1")
    b.commit()
    assert db[b"a"] == b"1"
    assert "entries=0" in repr(b)


# ---------------------------------------------------------------- iterators


def test_iterator_bounds_and_reverse(db):
    fill(db, 10)
    keys = [b"k%04d" % i for i in range(10)]
    assert [k for k, _ in db.iterator()] == keys
    assert list(db.iterator(include_value=False)) == keys
    assert list(db.iterator(include_key=False)) == [b"v%d" % i for i in range(10)]
    assert list(db.iterator(start=b"k0003", stop=b"k0006", include_value=False)) == keys[3:6]
    assert list(db.iterator(start=b"k0003", stop=b"k0006", reverse=True, include_value=False)) == keys[5:2:-1]
    assert list(db.iterator(start=b"k0007", include_value=False)) == keys[7:]
    assert list(db.iterator(stop=b"k0002", include_value=False)) == keys[:2]
    assert list(db.iterator(reverse=True, include_value=False)) == keys[::-1]
    assert list(db.iterator(start=b"k0005", stop=b"k0005")) == []
    assert list(db.iterator(start=b"k0006", stop=b"k0002")) == []
    assert list(db.iterator(start=b"z")) == []
    assert list(db.iterator(start=b"k00035", include_value=False)) == keys[4:]  # start between keys
    with pytest.raises(ValueError):
        db.iterator(include_key=False, include_value=False)


def test_iterator_prefix(db):
    fill(db, 3, prefix=b"a")
    fill(db, 3, prefix=b"b")
    db[b"b\xff\xff"] = b"edge"
    db[b"c"] = b"after"
    assert list(db.keys(prefix=b"a")) == [b"a0000", b"a0001", b"a0002"]
    assert list(db.keys(prefix=b"b", reverse=True)) == [b"b\xff\xff", b"b0002", b"b0001", b"b0000"]
    assert list(db.keys(prefix=b"b\xff")) == [b"b\xff\xff"]
    assert list(db.keys(prefix=b"b", start=b"b0001", stop=b"b0002")) == [b"b0001"]
    assert list(db.keys(prefix=b"a", start=b"0")) == [b"a0000", b"a0001", b"a0002"]
    assert list(db.keys(prefix=b"zz")) == []
    db[b"\xff\xff"] = b"top"
    assert list(db.keys(prefix=b"\xff")) == [b"\xff\xff"]


def test_keys_values_items(db):
    fill(db, 4)
    assert list(db.keys()) == [b"k%04d" % i for i in range(4)]
    assert list(db.values()) == [b"v%d" % i for i in range(4)]
    assert list(db.items()) == [(b"k%04d" % i, b"v%d" % i) for i in range(4)]
    assert list(db.items(start=b"k0002", reverse=True)) == [(b"k0003", b"v3"), (b"k0002", b"v2")]
    assert list(db.values(stop=b"k0001")) == [b"v0"]


def test_iterator_is_a_consistent_view_and_batches_reads(db):
    fill(db, 1000)
    it = db.keys()
    first = next(it)
    db[b"k0500x"] = b"new"
    del db[b"k0999"]
    rest = list(it)
    assert [first] + rest == [b"k%04d" % i for i in range(1000)]
    assert next(it, None) is None  # exhausted stays exhausted


def test_iterator_stays_valid_across_flush_and_compaction(db):
    fill(db, 3000)
    it = db.items()
    head = [next(it) for _ in range(10)]
    db.flush()
    db.compact_range()
    for i in range(0, 3000, 2):
        del db[b"k%04d" % i]
    db.compact_range()
    rest = list(it)
    assert head + rest == [(b"k%04d" % i, b"v%d" % i) for i in range(3000)]
    assert len(list(db.keys())) == 1500


def test_iterator_seek(db):
    fill(db, 10)
    it = db.keys()
    assert next(it.seek(b"k0004")) == b"k0004"
    assert next(it) == b"k0005"
    assert next(it.seek(b"k00071")) == b"k0008"
    it = db.keys(reverse=True)
    assert next(it.seek(b"k00051")) == b"k0005"
    assert next(it) == b"k0004"
    bounded = db.keys(start=b"k0003", stop=b"k0006")
    assert list(bounded.seek(b"a")) == [b"k0003", b"k0004", b"k0005"]
    assert list(bounded.seek(b"k0004")) == [b"k0004", b"k0005"]
    back = db.keys(start=b"k0003", stop=b"k0006", reverse=True)
    assert list(back.seek(b"z")) == [b"k0005", b"k0004", b"k0003"]
    it.close()
    assert next(it, None) is None
    with pytest.raises(shaledb.Error, match="closed"):
        it.seek(b"k")


def test_iterators_raise_closed_after_close(path):
    db = shaledb.DB(path)
    fill(db, 600)
    it = db.items()
    assert next(it) == (b"k0000", b"v0")  # read ahead: some entries are buffered
    snap = db.snapshot()
    cf = db.create_column_family("other")
    db.close()
    assert db.closed
    with pytest.raises(shaledb.Closed, match="closed"):
        next(it)
    with pytest.raises(shaledb.Closed):
        db.keys()
    with pytest.raises(shaledb.Closed):
        snap.get(b"k0000")
    with pytest.raises(shaledb.Closed):
        cf.put(b"a", b"b")
    with pytest.raises(shaledb.Closed):
        db[b"k0000"]
    with pytest.raises(shaledb.Closed):
        db.put(b"k", b"v")
    with pytest.raises(shaledb.Closed):
        db.flush()
    with pytest.raises(shaledb.Closed):
        db.snapshot()
    b = db.write_batch()
    b.put(b"x", b"y")
    with pytest.raises(shaledb.Closed):
        b.commit()
    db.close()  # closing twice is a no-op
    assert "closed" in repr(db)


def test_iterator_used_from_two_threads_is_refused_or_serial(db):
    # Stepping an iterator from several threads never crashes: each step either yields or raises shaledb.Error.
    fill(db, 2000)
    it = db.keys()
    seen, errors = [], []

    def worker():
        while True:
            try:
                k = next(it)
            except StopIteration:
                return
            except shaledb.Error:
                errors.append(1)
                continue
            seen.append(k)

    ts = [threading.Thread(target=worker) for _ in range(3)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert sorted(seen) == [b"k%04d" % i for i in range(2000)]


# ---------------------------------------------------------------- snapshots


def test_snapshot_isolation(db):
    db[b"a"] = b"old"
    db[b"b"] = b"old"
    snap = db.snapshot()
    db[b"a"] = b"new"
    del db[b"b"]
    db[b"c"] = b"new"
    db.flush()  # isolation holds across a flush too
    assert snap.get(b"a") == b"old"
    assert snap[b"b"] == b"old"
    assert snap.get(b"c") is None and snap.get(b"c", b"-") == b"-"
    assert b"c" not in snap and b"a" in snap
    with pytest.raises(KeyError):
        snap[b"c"]
    assert snap.multi_get([b"a", b"b", b"c"]) == [b"old", b"old", None]
    assert snap[[b"a", b"c"]] == [b"old", None]
    assert list(snap.items()) == [(b"a", b"old"), (b"b", b"old")]
    assert list(snap.keys(reverse=True)) == [b"b", b"a"]
    assert list(snap.values()) == [b"old", b"old"]
    assert list(snap) == [b"a", b"b"]
    assert list(snap.iterator(prefix=b"b", include_value=False)) == [b"b"]
    assert db.get(b"a", snapshot=snap) == b"old"
    assert db.multi_get([b"b"], snapshot=snap) == [b"old"]
    assert list(db.keys(snapshot=snap)) == [b"a", b"b"]
    assert list(db.iterator(snapshot=snap, include_value=False)) == [b"a", b"b"]
    assert db[b"a"] == b"new"
    assert isinstance(snap.sequence, int)
    it = snap.keys()
    snap.release()
    assert list(it) == [b"a", b"b"]  # an iterator keeps its own view
    with pytest.raises(shaledb.Closed, match="released"):
        snap.get(b"a")
    assert "released" in repr(snap)


def test_snapshot_context_manager(db):
    db[b"a"] = b"1"
    with db.snapshot() as s:
        db[b"a"] = b"2"
        assert s[b"a"] == b"1"
    with pytest.raises(shaledb.Closed):
        s[b"a"]


# ---------------------------------------------------------------- column families


def test_column_families(path):
    with shaledb.DB(path) as db:
        logs = db.create_column_family("logs")
        counters = db.create_column_family("counters", shaledb.Options(merge_operator="uint64add"))
        assert logs.name == "logs" and db.name == "default"
        logs[b"k"] = b"in logs"
        db[b"k"] = b"in default"
        assert logs[b"k"] == b"in logs" and db[b"k"] == b"in default"
        counters.merge(b"n", U64.pack(1))
        counters.merge(b"n", U64.pack(2))
        assert U64.unpack(counters[b"n"])[0] == 3
        assert db.column_family_names() == ["default", "logs", "counters"]
        same = db.get_column_family("logs")
        assert list(same.items()) == [(b"k", b"in logs")]
        with db.write_batch() as b:
            b.put(b"x", b"1", column_family=logs)
            b.put(b"x", b"2")
            b.delete(b"k", column_family=logs)
            b.merge(b"n", U64.pack(4), column_family=counters)
        with logs.write_batch() as b:  # a family's batch writes to that family by default
            b.put(b"y", b"3")
            b.delete_range(b"a", b"b", column_family=db)
        assert list(logs.items()) == [(b"x", b"1"), (b"y", b"3")]
        assert U64.unpack(counters[b"n"])[0] == 7
        assert db[b"x"] == b"2"
        snap = db.snapshot()
        logs[b"x"] = b"later"
        assert logs.get(b"x", snapshot=snap) == b"1"
        assert logs.multi_get([b"x", b"zz"]) == [b"later", None]
        assert logs[[b"x"]] == [b"later"]
        assert list(logs.keys(reverse=True)) == [b"y", b"x"]
        logs.flush()
        logs.compact_range()
        assert logs.property("rocksdb.num-files-at-level0") == "0"
        assert b"x" in logs
        del logs[b"x"]
        logs.delete(b"y")
        logs.put(b"z", b"1", sync=True)
        logs.delete_range(b"a", b"zz")
        assert list(logs) == []
        with pytest.raises(shaledb.NotFound, match="nope"):
            db.get_column_family("nope")
        with pytest.raises(shaledb.InvalidArgument):
            db.create_column_family("logs")
        db.create_column_family("temp")
        db.drop_column_family("temp")
        with pytest.raises(shaledb.NotFound):
            db.drop_column_family("temp")
        assert "logs" in repr(logs)
    assert shaledb.DB.list_column_families(path) == ["default", "logs", "counters"]
    with shaledb.DB(path, column_families={"counters": shaledb.Options(merge_operator="uint64add")}) as db:
        assert U64.unpack(db.get_column_family("counters")[b"n"])[0] == 7
        assert "logs" in db.column_family_names()


# ---------------------------------------------------------------- options


def test_options_by_engine_names():
    o = shaledb.Options(write_buffer_size=1 << 20, compression="zstd", bloom_bits_per_key=8.0)
    assert o.write_buffer_size == 1 << 20
    assert o.compression == "zstd"
    o.compression = "none"
    o.max_open_files = 100
    o.paranoid_checks = False
    o.bottommost_compression = "lz4"
    o.prefix_extractor = "fixed:3"
    assert (o.compression, o.max_open_files, o.paranoid_checks) == ("none", 100, False)
    assert o.bottommost_compression == "lz4" and o.prefix_extractor == "rocksdb.FixedPrefix.3"
    o.bottommost_compression = None
    o.merge_operator = "stringappend"
    assert o.merge_operator == "stringappend"
    o.merge_operator = None
    assert o.merge_operator is None
    d = o.to_dict()
    assert set(d) == set(shaledb.Options.names())
    assert d["write_buffer_size"] == 1 << 20
    c = o.copy()
    c.write_buffer_size = 2 << 20
    assert o.write_buffer_size == 1 << 20
    assert "Options(" in repr(o)
    with pytest.raises(AttributeError, match="no option"):
        shaledb.Options(no_such_option=1)
    with pytest.raises(AttributeError):
        o.no_such_option
    with pytest.raises(TypeError, match="write_buffer_size"):
        o.write_buffer_size = "big"
    with pytest.raises(ValueError, match="unknown compression"):
        o.compression = "brotli"
    with pytest.raises(ValueError, match="unknown operator"):
        o.merge_operator = "sum"
    with pytest.raises(ValueError, match="prefix_extractor"):
        o.prefix_extractor = "fixed:x"


def test_options_are_used_and_validated_by_the_engine(path, tmp_path):
    with pytest.raises(shaledb.InvalidArgument, match="write_buffer_size"):
        shaledb.DB(path, shaledb.Options(write_buffer_size=0))
    with pytest.raises(shaledb.InvalidArgument, match="does not exist"):
        shaledb.DB(path, create_if_missing=False)
    with pytest.raises(shaledb.InvalidArgument, match="does not exist"):
        shaledb.DB(path, shaledb.Options(create_if_missing=False))
    with shaledb.DB(path, shaledb.Options(create_if_missing=False), create_if_missing=True) as db:
        db[b"a"] = b"1"
    with pytest.raises(shaledb.InvalidArgument):
        shaledb.DB(path, shaledb.Options(error_if_exists=True))
    p = tmp_path / "prefixed"
    with shaledb.DB(str(p), shaledb.Options(prefix_extractor="fixed:2", compression="snappy")) as db:
        db[b"aa1"] = b"x"
        db[b"ab1"] = b"y"
        assert list(db.keys(prefix=b"aa")) == [b"aa1"]


# ---------------------------------------------------------------- errors


def test_exception_hierarchy():
    for name in ["IoError", "Corruption", "InvalidArgument", "Busy", "ReadOnly", "NotSupported", "Closed",
                 "TimedOut", "NotFound"]:
        assert issubclass(getattr(shaledb, name), shaledb.Error)
    assert issubclass(shaledb.Error, Exception)


def test_busy_when_open_twice(db, path):
    with pytest.raises(shaledb.Busy, match="LOCK"):
        shaledb.DB(path)


def test_io_error(tmp_path):
    f = tmp_path / "a-file"
    f.write_text("not a directory")
    with pytest.raises(shaledb.IoError, match="a-file"):
        shaledb.DB(str(f))


def test_corruption(path):
    with shaledb.DB(path, shaledb.Options(compression="none")) as db:
        for i in range(2000):
            db[b"key%05d" % i] = b"value-%05d" % i * 4
        db.flush()
    ssts = sorted(pathlib.Path(path).glob("*.sst"))
    assert ssts
    data = bytearray(ssts[0].read_bytes())
    for i in range(100, 4000, 7):
        data[i] ^= 0x5A
    ssts[0].write_bytes(bytes(data))
    with pytest.raises(shaledb.Corruption, match="corruption"):
        db = shaledb.DB(path)
        try:
            db.verify_checksums()
        finally:
            db.close()


def test_not_supported_and_read_only_open(path):
    with shaledb.DB(path) as db:
        db[b"a"] = b"1"
    with shaledb.DB(path, read_only=True) as ro:
        assert ro.read_only
        assert ro[b"a"] == b"1"
        with pytest.raises(shaledb.NotSupported):
            ro[b"b"] = b"2"
        with pytest.raises(shaledb.NotSupported):
            ro.create_column_family("x")


WRITER = textwrap.dedent(
    """
    import sys, shaledb
    db = shaledb.DB(sys.argv[1])
    for i in range(200):
        db[b"w%04d" % i] = b"v%d" % i
    with db.write_batch() as b:
        b.put(b"batch", b"whole")
    print("ready", flush=True)
    sys.stdin.readline()
    db[b"after"] = b"x"
    print("done", flush=True)
    sys.stdin.readline()
    db.close()
    """
)


def test_read_only_open_beside_a_writer_process(path):
    w = subprocess.Popen([sys.executable, "-c", WRITER, path], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                         text=True)
    try:
        assert w.stdout.readline().strip() == "ready"
        with pytest.raises(shaledb.Busy):
            shaledb.DB(path)  # the writer holds the lock
        with shaledb.DB(path, read_only=True) as ro:  # takes no lock: opens beside the writer
            assert ro[b"w0199"] == b"v199"
            assert ro[b"batch"] == b"whole"
            assert len(list(ro.keys(prefix=b"w"))) == 200
            with pytest.raises(shaledb.NotSupported):
                ro.put(b"x", b"y")
        w.stdin.write("\n")
        w.stdin.flush()
        assert w.stdout.readline().strip() == "done"
        with shaledb.DB(path, read_only=True) as ro:  # a new read-only open sees the newer write
            assert ro[b"after"] == b"x"
        w.stdin.write("\n")
        w.stdin.flush()
        assert w.wait(timeout=60) == 0
    finally:
        if w.poll() is None:
            w.kill()
            w.wait()


# ---------------------------------------------------------------- checkpoint, backups, property, flush, compact


def test_checkpoint(db, tmp_path):
    fill(db, 100)
    cp = str(tmp_path / "cp")
    db.checkpoint(cp)
    db[b"after"] = b"x"
    with shaledb.DB(cp) as copy:
        assert len(list(copy.keys())) == 100
        assert copy.get(b"after") is None
    with pytest.raises(shaledb.InvalidArgument, match="already exists"):
        db.checkpoint(cp)


def test_backups(db, tmp_path):
    bdir = str(tmp_path / "backups")
    fill(db, 50)
    with shaledb.BackupEngine(bdir) as be:
        first = be.create_backup(db)
        db[b"second"] = b"x"
        second = be.create_backup(db)
        assert second > first
        listed = be.list()
        assert [b["id"] for b in listed] == [first, second]
        assert set(listed[0]) == {"id", "timestamp", "size", "file_count", "sequence"}
        be.verify(first)
        restored = str(tmp_path / "restored")
        be.restore(first, restored)
        with shaledb.DB(restored) as r:
            assert len(list(r.keys())) == 50 and r.get(b"second") is None
        assert be.purge_old(1) == [first]
        with pytest.raises(shaledb.Error):
            be.verify(first)
        be.delete(second)
        assert be.list() == []
    with pytest.raises(shaledb.Closed):
        be.list()
    third = db.create_backup(bdir)  # the one-call form
    with shaledb.BackupEngine(bdir) as be:
        assert [b["id"] for b in be.list()] == [third]
        with pytest.raises(shaledb.Busy):
            shaledb.BackupEngine(bdir)


def test_property_flush_compact_and_the_rest(db, path):
    fill(db, 100)
    assert db.property("rocksdb.num-files-at-level0") == "0"
    db.flush()
    assert db.property("rocksdb.num-files-at-level0") == "1"
    db.compact_range()
    db.compact_range(b"k0000", b"k0050")
    db.wait_for_compaction()
    assert db.property("rocksdb.num-files-at-level0") == "0"
    assert db.property("no.such.property") is None
    assert db.property("shaledb.stats")
    db.sync_wal()
    db.verify_checksums()
    assert len(db.identity) == 32
    assert str(db.path) == path
    assert not db.read_only and not db.closed
    assert "shaledb.DB" in repr(db)
    assert isinstance(db, shaledb.ColumnFamily)


def test_destroy(path):
    with shaledb.DB(path) as db:
        db[b"a"] = b"1"
    assert shaledb.destroy(path)
    assert not os.path.exists(path)


def test_context_manager_closes_on_exception(path):
    with pytest.raises(RuntimeError):
        with shaledb.DB(path) as db:
            db[b"a"] = b"1"
            raise RuntimeError
    assert db.closed
    with shaledb.DB(path) as db:  # the lock was released
        assert db[b"a"] == b"1"


def test_accepts_path_like(tmp_path):
    with shaledb.DB(tmp_path / "p") as db:
        db[b"a"] = b"1"
        assert db.path == str(tmp_path / "p")


# ---------------------------------------------------------------- threads and the GIL


def test_threads_read_in_parallel_correctly(db):
    n = 5000
    fill(db, n)
    db.flush()
    errors = []

    def reader(seed):
        rng = random.Random(seed)
        try:
            for _ in range(3000):
                i = rng.randrange(n)
                assert db[b"k%04d" % i] == b"v%d" % i
            assert db.multi_get([b"k0001", b"k0002"]) == [b"v1", b"v2"]
            assert sum(1 for _ in db.keys()) >= n
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    def writer():
        try:
            for i in range(3000):
                db[b"w%05d" % i] = b"x"
        except Exception as e:  # noqa: BLE001
            errors.append(e)

    ts = [threading.Thread(target=reader, args=(s,)) for s in range(4)] + [threading.Thread(target=writer)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert errors == []
    assert len(list(db.keys(prefix=b"w"))) == 3000


def test_gil_is_released_during_engine_calls(db):
    # With a long switch interval, another thread runs while this one is inside an engine call only if the
    # call released the GIL: the spinner counts only while `inside` is set.
    keys = [b"k%06d" % i for i in range(100_000)]
    with db.write_batch() as b:
        for k in keys:
            b.put(k, b"v")
    old = sys.getswitchinterval()
    inside = [False]
    stop = [False]
    counted = [0]

    def spinner():
        while not stop[0]:
            if inside[0]:
                counted[0] += 1

    t = threading.Thread(target=spinner)
    sys.setswitchinterval(2.0)
    try:
        t.start()
        time.sleep(0.05)  # blocks: the spinner takes the GIL and spins
        for _ in range(3):
            inside[0] = True
            got = db.multi_get(keys)  # one long engine call
            inside[0] = False
            assert got[-1] == b"v"
            if counted[0]:
                break
    finally:
        stop[0] = True
        sys.setswitchinterval(old)
        t.join()
    assert counted[0] > 0


# ---------------------------------------------------------------- batches across a kill -9 of the writer

KILL_WRITER = textwrap.dedent(
    """
    import sys, shaledb
    db = shaledb.DB(sys.argv[1])
    start = int(sys.argv[2])
    i = start
    while True:
        with db.write_batch() as b:
            for j in range(20):
                b.put(b"b%07d-%02d" % (i, j), b"batch %d entry %d " % (i, j) * 4)
            b.put(b"last", b"%d" % i)
        print("ack", i, flush=True)
        i += 1
    """
)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_batches_are_atomic_across_kill_9_of_the_writer(path, seed):
    rng = random.Random(seed)
    acked = -1
    start = 0
    for _ in range(3):  # kill, reopen, check, write more, kill again
        w = subprocess.Popen([sys.executable, "-c", KILL_WRITER, path, str(start)], stdout=subprocess.PIPE,
                             text=True)
        stop_after = rng.randrange(50, 400)
        seen = 0
        for line in w.stdout:
            word, n = line.split()
            assert word == "ack"
            acked = int(n)
            seen += 1
            if seen >= stop_after:
                break
        # More batches may commit between the last ack read and the kill: those are whole or absent too.
        time.sleep(rng.random() * 0.05)
        os.kill(w.pid, signal.SIGKILL)
        w.wait()
        w.stdout.close()
        with shaledb.DB(path) as db:
            per_batch = {}
            for k in db.keys(prefix=b"b"):
                per_batch.setdefault(int(k[1:8]), []).append(k)
            for i, ks in per_batch.items():
                assert len(ks) == 20, f"batch {i} is partial: {len(ks)} of 20 entries"
            for i in range(acked + 1):
                assert i in per_batch, f"acknowledged batch {i} is missing"
            last = int(db[b"last"])
            assert last >= acked
            assert sorted(per_batch) == list(range(last + 1))
            start = last + 1


# ---------------------------------------------------------------- the stubs


def test_stubs_cover_the_module():
    stub = pathlib.Path(__file__).resolve().parent.parent / "shaledb.pyi"
    tree = ast.parse(stub.read_text())
    stubbed = {}
    for node in tree.body:
        if isinstance(node, ast.ClassDef):
            stubbed[node.name] = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
        elif isinstance(node, ast.FunctionDef):
            stubbed[node.name] = set()
    public = [n for n in dir(shaledb) if not n.startswith("_") and n not in ("ENGINE_COMMIT", "shaledb")]
    for name in public:
        assert name in stubbed, f"shaledb.{name} is missing from shaledb.pyi"
        obj = getattr(shaledb, name)
        if isinstance(obj, type) and not issubclass(obj, BaseException):
            methods = {m for m in vars(obj) if not m.startswith("_") or m in (
                "__getitem__", "__setitem__", "__delitem__", "__contains__", "__iter__", "__next__",
                "__enter__", "__exit__", "__len__")}
            missing = methods - stubbed[name]
            assert not missing, f"shaledb.{name}: {sorted(missing)} missing from shaledb.pyi"
    for cls in ("DB", "ColumnFamily", "Snapshot", "Iterator", "WriteBatch", "BackupEngine", "Options"):
        assert getattr(shaledb, cls).__doc__, f"shaledb.{cls} has no docstring"
