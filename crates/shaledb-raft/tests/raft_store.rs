//! The raft store against openraft's storage suite, and the properties openraft's suite does not check:
//! restarts, corruption, crash atomicity of apply, snapshot install.

use std::collections::BTreeSet;
use std::sync::Arc;

use openraft::storage::{RaftLogReader, RaftLogStorage, RaftLogStorageExt, RaftSnapshotBuilder, RaftStateMachine};
use openraft::testing::{StoreBuilder, Suite};
use openraft::{CommittedLeaderId, Entry, EntryPayload, LogId, Membership, StorageError, Vote};
use shaledb::{Db, Fs, Options, WriteBatch};
use shaledb_raft::{LogStore, NodeId, Proposal, Response, StateMachine, TypeConfig};
use shaledb_vfs::{MemFs, PowerLoss};

struct Builder;

impl StoreBuilder<TypeConfig, LogStore, StateMachine, tempfile::TempDir> for Builder {
    async fn build(&self) -> Result<(tempfile::TempDir, LogStore, StateMachine), StorageError<NodeId>> {
        let dir = tempfile::tempdir().expect("temp dir");
        let log = LogStore::open(dir.path().join("log"), Options::default()).expect("log store");
        let sm = StateMachine::open(dir.path().join("sm"), Options::default()).expect("state machine");
        Ok((dir, log, sm))
    }
}

#[test]
fn openraft_storage_suite() {
    Suite::test_all(Builder).unwrap();
}

fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Runtime::new().unwrap()
}

fn log_id(term: u64, index: u64) -> LogId<NodeId> {
    LogId::new(CommittedLeaderId::new(term, 1), index)
}

fn put_entry(term: u64, index: u64) -> Entry<TypeConfig> {
    padded_put_entry(term, index, 0)
}

/// A put of `key{index}` whose value is `value{index}` followed by `pad` bytes.
fn padded_put_entry(term: u64, index: u64, pad: usize) -> Entry<TypeConfig> {
    let mut batch = WriteBatch::new();
    let mut value = format!("value{index}").into_bytes();
    value.resize(value.len() + pad, b'.');
    batch.put(format!("key{index:04}"), value);
    Entry { log_id: log_id(term, index), payload: EntryPayload::Normal(Proposal::new(&batch)) }
}

/// Index 0 blank, 1 membership {1,2,3}, then puts of `key{i}` up to `last`.
fn entries(last: u64) -> Vec<Entry<TypeConfig>> {
    padded_entries(last, 0)
}

fn padded_entries(last: u64, pad: usize) -> Vec<Entry<TypeConfig>> {
    let mut out = vec![
        Entry { log_id: log_id(1, 0), payload: EntryPayload::Blank },
        Entry {
            log_id: log_id(1, 1),
            payload: EntryPayload::Membership(Membership::new(vec![BTreeSet::from([1, 2, 3])], ())),
        },
    ];
    out.extend((2..=last).map(|i| padded_put_entry(1, i, pad)));
    out
}

fn mem_opts(fs: &MemFs) -> Options {
    Options { fs: Arc::new(fs.clone()), ..Options::default() }
}

#[test]
fn restart_keeps_log_vote_and_applied_state() {
    let dir = tempfile::tempdir().unwrap();
    let (log_dir, sm_dir) = (dir.path().join("log"), dir.path().join("sm"));
    let vote = Vote::new_committed(3, 2);
    rt().block_on(async {
        let mut log = LogStore::open(&log_dir, Options::default()).unwrap();
        let mut sm = StateMachine::open(&sm_dir, Options::default()).unwrap();
        log.blocking_append(entries(9)).await.unwrap();
        log.save_vote(&vote).await.unwrap();
        log.save_committed(Some(log_id(1, 7))).await.unwrap();
        log.purge(log_id(1, 2)).await.unwrap();
        let responses = sm.apply(entries(7)).await.unwrap();
        assert_eq!(responses[0], Response::Recorded);
        assert_eq!(responses[1], Response::Recorded);
        assert_eq!(responses[7], Response::Applied);
        drop(log);
        sm.close().unwrap();
    });
    rt().block_on(async {
        let mut log = LogStore::open(&log_dir, Options::default()).unwrap();
        let mut sm = StateMachine::open(&sm_dir, Options::default()).unwrap();
        let state = log.get_log_state().await.unwrap();
        assert_eq!(state.last_purged_log_id, Some(log_id(1, 2)));
        assert_eq!(state.last_log_id, Some(log_id(1, 9)));
        assert_eq!(log.read_vote().await.unwrap(), Some(vote));
        assert_eq!(log.read_committed().await.unwrap(), Some(log_id(1, 7)));
        let got = log.try_get_log_entries(0..100).await.unwrap();
        assert_eq!(got.iter().map(|e| e.log_id.index).collect::<Vec<_>>(), (3..=9).collect::<Vec<_>>());
        assert_eq!(got, entries(9)[3..].to_vec());
        let (applied, membership) = sm.applied_state().await.unwrap();
        assert_eq!(applied, Some(log_id(1, 7)));
        assert_eq!(membership.log_id(), &Some(log_id(1, 1)));
        assert_eq!(membership.membership().voter_ids().collect::<BTreeSet<_>>(), BTreeSet::from([1, 2, 3]));
        let db = sm.db();
        assert_eq!(db.get("key0007").unwrap(), Some(b"value7".to_vec()));
        assert_eq!(db.get("key0008").unwrap(), None);
    });
}

/// Writes `f(value)` over the stored record of entry `index`, through the engine directly.
fn tamper(log_dir: &std::path::Path, index: u64, f: impl FnOnce(Option<Vec<u8>>) -> Option<Vec<u8>>) {
    let db = Db::open(log_dir, Options::default()).unwrap();
    let mut key = vec![0x01];
    key.extend_from_slice(&index.to_be_bytes());
    match f(db.get(&key).unwrap()) {
        Some(v) => db.put(&key, v).unwrap(),
        None => db.delete(&key).unwrap(),
    }
    db.close().unwrap();
}

fn log_with_entries(last: u64) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut log = LogStore::open(dir.path(), Options::default()).unwrap();
        log.blocking_append(entries(last)).await.unwrap();
    });
    dir
}

#[test]
fn corrupt_entry_in_the_middle_is_refused_at_open() {
    let dir = log_with_entries(10);
    tamper(dir.path(), 5, |v| {
        let mut v = v.expect("entry 5 stored");
        let mid = v.len() / 2;
        v[mid] ^= 0x10;
        Some(v)
    });
    let err = LogStore::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    let text = err.to_string();
    assert!(text.contains("log entry 5") && text.contains("checksum"), "{text}");
}

#[test]
fn missing_entry_in_the_middle_is_refused_at_open() {
    let dir = log_with_entries(10);
    tamper(dir.path(), 4, |_| None);
    let err = LogStore::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.is_corruption(), "{err}");
    assert!(err.to_string().contains("log entry 4 is missing"), "{err}");
}

#[test]
fn entry_stored_under_another_index_is_refused_at_open() {
    let dir = log_with_entries(10);
    let seven = {
        let db = Db::open(dir.path(), Options::default()).unwrap();
        let mut key = vec![0x01];
        key.extend_from_slice(&7u64.to_be_bytes());
        let v = db.get(&key).unwrap().unwrap();
        db.close().unwrap();
        v
    };
    tamper(dir.path(), 6, |_| Some(seven));
    let err = LogStore::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.to_string().contains("stored at index 6 holds index 7"), "{err}");
}

#[test]
fn corruption_found_after_open_is_a_storage_error() {
    let dir = log_with_entries(10);
    rt().block_on(async {
        let mut log = LogStore::open(dir.path(), Options::default()).unwrap();
        let mut key = vec![0x01];
        key.extend_from_slice(&3u64.to_be_bytes());
        log.db().put(&key, b"not a record").unwrap();
        let err = log.try_get_log_entries(0..=10).await.unwrap_err();
        assert!(err.to_string().contains("log entry 3"), "{err}");
        log.db().delete(&key).unwrap();
        let mut reader = log.get_log_reader().await;
        let err = reader.try_get_log_entries(2..6).await.unwrap_err();
        assert!(err.to_string().contains("log entry 3 is missing"), "{err}");
        // Ranges that do not cross the hole are still served.
        assert_eq!(reader.try_get_log_entries(4..6).await.unwrap().len(), 2);
    });
}

#[test]
fn a_hole_left_by_an_append_is_refused_by_reads_and_at_open() {
    let dir = log_with_entries(5);
    rt().block_on(async {
        let mut log = LogStore::open(dir.path(), Options::default()).unwrap();
        // openraft's contract forbids this append; the store does not trust that and checks every read.
        log.blocking_append([put_entry(1, 7)]).await.unwrap();
        assert_eq!(log.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 7)));
        let err = log.try_get_log_entries(4..8).await.unwrap_err();
        assert!(err.to_string().contains("log entry 6 is missing"), "{err}");
        assert_eq!(log.try_get_log_entries(7..8).await.unwrap(), vec![put_entry(1, 7)]);
    });
    let err = LogStore::open(dir.path(), Options::default()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("log entry 6 is missing"), "{err}");
}

#[test]
fn synced_appends_and_vote_survive_power_loss() {
    let fs = MemFs::new();
    rt().block_on(async {
        let mut log = LogStore::open("/n/log", mem_opts(&fs)).unwrap();
        log.blocking_append(entries(20)).await.unwrap();
        log.save_vote(&Vote::new(4, 2)).await.unwrap();
        fs.power_loss(PowerLoss::DropUnsynced, 7);
    });
    rt().block_on(async {
        let mut log = LogStore::open("/n/log", mem_opts(&fs)).unwrap();
        assert_eq!(log.get_log_state().await.unwrap().last_log_id, Some(log_id(1, 20)));
        assert_eq!(log.read_vote().await.unwrap(), Some(Vote::new(4, 2)));
        assert_eq!(log.try_get_log_entries(..).await.unwrap(), entries(20));
    });
}

/// The keys the state machine holds are exactly those of the entries up to its applied id.
fn assert_data_matches_applied(sm: &StateMachine, last: u64) -> u64 {
    let applied = sm.applied().0.map_or(0, |l| l.index);
    let db = sm.db();
    for i in 2..=last {
        let got = db.get(format!("key{i:04}")).unwrap();
        assert_eq!(got.is_some(), i <= applied, "key{i} with applied index {applied}");
    }
    applied
}

#[test]
fn apply_is_atomic_with_the_applied_id_across_power_loss() {
    let modes = [
        PowerLoss::DropUnsynced,
        PowerLoss::KeepRandomPages { keep_probability: 0.5 },
        PowerLoss::KeepRandomPages { keep_probability: 0.9 },
        PowerLoss::GarbleUnsynced,
    ];
    // Values of 1 KiB spread the unsynced WAL tail over several 4 KiB pages, so a torn write-back can keep a
    // prefix of the unsynced applies.
    let all = padded_entries(60, 1024);
    let mut recovered = Vec::new();
    for (n, mode) in modes.into_iter().enumerate() {
        for seed in 0..4u64 {
            let fs = MemFs::new();
            rt().block_on(async {
                let mut sm = StateMachine::open("/n/sm", mem_opts(&fs)).unwrap();
                sm.apply(all[..21].to_vec()).await.unwrap();
                sm.db().sync_wal().unwrap();
                sm.apply(all[21..].to_vec()).await.unwrap();
                fs.power_loss(mode, seed * 31 + n as u64);
            });
            rt().block_on(async {
                let mut sm = StateMachine::open("/n/sm", mem_opts(&fs)).unwrap();
                let applied = assert_data_matches_applied(&sm, 60);
                assert!(applied >= 20, "synced entries lost: applied {applied}");
                recovered.push(applied);
                // openraft re-applies what follows the applied id; each entry then lands exactly once.
                let rest: Vec<_> = all.iter().skip(applied as usize + 1).cloned().collect();
                sm.apply(rest).await.unwrap();
                assert_eq!(assert_data_matches_applied(&sm, 60), 60);
            });
        }
    }
    assert!(recovered.contains(&20), "no crash lost the unsynced applies: {recovered:?}");
    assert!(recovered.iter().any(|&a| a > 20 && a < 60), "no crash kept a strict prefix of them: {recovered:?}");
}

#[test]
fn rejected_proposal_moves_the_applied_id_only() {
    let dir = tempfile::tempdir().unwrap();
    // Column family ids are per database: "b" is family 2 of this one, and the state machine's data has only
    // families 0 (default) and 1 (raft_applied), so a batch naming family 2 is refused there, on every member.
    let other = Db::open(dir.path().join("other"), Options::default()).unwrap();
    let _a = other.create_column_family("a", Options::default()).unwrap();
    let b = other.create_column_family("b", Options::default()).unwrap();
    let mut foreign = WriteBatch::new();
    foreign.put("plain", "1").put_cf(&b, "k", "v");
    rt().block_on(async {
        let mut sm = StateMachine::open(dir.path().join("sm"), Options::default()).unwrap();
        let out = sm
            .apply([
                Entry {
                    log_id: log_id(1, 1),
                    payload: EntryPayload::Normal(Proposal { batch: b"garbage".to_vec(), tables: Vec::new() }),
                },
                Entry { log_id: log_id(1, 2), payload: EntryPayload::Normal(Proposal::new(&foreign)) },
                put_entry(1, 3),
            ])
            .await
            .unwrap();
        assert!(matches!(&out[0], Response::Rejected { reason } if reason.contains("header")), "{out:?}");
        assert!(matches!(&out[1], Response::Rejected { reason } if reason.contains("column family")), "{out:?}");
        assert_eq!(out[2], Response::Applied);
        assert_eq!(sm.applied().0, Some(log_id(1, 3)));
        let db = sm.db();
        assert_eq!(db.get("plain").unwrap(), None, "a rejected batch applies nothing");
        assert_eq!(db.get("key0003").unwrap(), Some(b"value3".to_vec()));
    });
}

#[test]
fn snapshot_install_replaces_the_data_and_survives_restart() {
    let dir = tempfile::tempdir().unwrap();
    let (leader_dir, follower_dir) = (dir.path().join("leader"), dir.path().join("follower"));
    rt().block_on(async {
        let mut leader = StateMachine::open(&leader_dir, Options::default()).unwrap();
        leader.apply(entries(30)).await.unwrap();
        let snap = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
        assert_eq!(snap.meta.last_log_id, Some(log_id(1, 30)));

        let mut follower = StateMachine::open(&follower_dir, Options::default()).unwrap();
        follower.db().put("stale", "from before").unwrap();
        let mut incoming = follower.begin_receiving_snapshot().await.unwrap();
        *incoming = *snap.snapshot;
        follower.install_snapshot(&snap.meta, incoming).await.unwrap();
        assert_eq!(follower.generation(), 1);
        assert_eq!(follower.applied_state().await.unwrap(), leader.applied_state().await.unwrap());
        assert_eq!(assert_data_matches_applied(&follower, 30), 30);
        assert_eq!(follower.db().get("stale").unwrap(), None);
        let current = follower.get_current_snapshot().await.unwrap().expect("installed snapshot kept");
        assert_eq!(current.meta, snap.meta);
        // Applying goes on in the new generation.
        follower.apply([put_entry(1, 31)]).await.unwrap();
        follower.close().unwrap();
    });
    assert!(!follower_dir.join("data-0").exists(), "old generation removed");
    rt().block_on(async {
        let mut follower = StateMachine::open(&follower_dir, Options::default()).unwrap();
        assert_eq!(follower.generation(), 1);
        assert_eq!(follower.applied_state().await.unwrap().0, Some(log_id(1, 31)));
        assert_eq!(assert_data_matches_applied(&follower, 31), 31);
    });
}

#[test]
fn snapshot_announced_past_its_contents_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    rt().block_on(async {
        let mut leader = StateMachine::open(dir.path().join("leader"), Options::default()).unwrap();
        leader.apply(entries(5)).await.unwrap();
        let snap = leader.get_snapshot_builder().await.build_snapshot().await.unwrap();
        let mut follower = StateMachine::open(dir.path().join("follower"), Options::default()).unwrap();
        let mut meta = snap.meta.clone();
        meta.last_log_id = Some(log_id(1, 9));
        let err = follower.install_snapshot(&meta, snap.snapshot).await.unwrap_err();
        assert!(err.to_string().contains("announced"), "{err}");
        assert_eq!(follower.generation(), 0);
        assert_eq!(follower.applied().0, None);
    });
}

#[test]
fn a_crash_before_the_switch_keeps_the_old_generation() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sm");
    rt().block_on(async {
        let mut sm = StateMachine::open(&root, Options::default()).unwrap();
        sm.apply(entries(4)).await.unwrap();
        sm.close().unwrap();
    });
    // What an install leaves when it dies before CURRENT is renamed: a new generation, a temp CURRENT.
    let half = Db::open(root.join("data-1"), Options::default()).unwrap();
    half.put("key0002", "from the snapshot").unwrap();
    half.close().unwrap();
    std::fs::write(root.join("CURRENT.tmp"), "data-1\n").unwrap();
    let sm = StateMachine::open(&root, Options::default()).unwrap();
    assert_eq!(sm.generation(), 0);
    assert_eq!(sm.applied().0, Some(log_id(1, 4)));
    assert_eq!(sm.db().get("key0002").unwrap(), Some(b"value2".to_vec()));
    assert!(!root.join("data-1").exists() && !root.join("CURRENT.tmp").exists());
}

#[test]
fn corrupt_current_file_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("sm");
    StateMachine::open(&root, Options::default()).unwrap().close().unwrap();
    std::fs::write(root.join("CURRENT"), "data-x\n").unwrap();
    let err = StateMachine::open(&root, Options::default()).unwrap_err();
    assert!(err.is_corruption() && err.to_string().contains("CURRENT"), "{err}");
}

/// An SST (as `SstFileWriter` writes it) of `t{i}` = `table{i}` for `i` in `range`.
fn table(range: std::ops::Range<u32>) -> Vec<u8> {
    let fs = MemFs::new();
    let mut w = shaledb::ingest::SstFileWriter::create(&mem_opts(&fs));
    w.open("/t.sst").unwrap();
    for i in range {
        w.put(format!("t{i:05}"), format!("table{i}")).unwrap();
    }
    w.finish().unwrap();
    fs.read_all(std::path::Path::new("/t.sst")).unwrap()
}

/// Entry `index`: tables of `t0..t999` and `t1000..t1999`, ingested before its batch's put of `after{index}`.
fn tables_entry(index: u64) -> Entry<TypeConfig> {
    let mut batch = WriteBatch::new();
    batch.put(format!("after{index}"), "1");
    Entry {
        log_id: log_id(1, index),
        payload: EntryPayload::Normal(Proposal::with_tables(&batch, vec![table(0..1000), table(1000..2000)])),
    }
}

fn assert_tables_in(db: &Db) {
    for i in [0u32, 999, 1000, 1999] {
        assert_eq!(db.get(format!("t{i:05}")).unwrap(), Some(format!("table{i}").into_bytes()), "t{i}");
    }
    assert_eq!(db.get("t02000").unwrap(), None);
}

#[test]
fn proposal_tables_are_ingested_before_the_batch_and_survive_power_loss() {
    let mut all = padded_entries(30, 1024);
    all[12] = tables_entry(12);
    let mut recovered = Vec::new();
    for (n, mode) in
        [PowerLoss::DropUnsynced, PowerLoss::KeepRandomPages { keep_probability: 0.5 }].into_iter().enumerate()
    {
        for seed in 0..3u64 {
            let fs = MemFs::new();
            rt().block_on(async {
                let mut sm = StateMachine::open("/n/sm", mem_opts(&fs)).unwrap();
                let out = sm.apply(all.clone()).await.unwrap();
                assert_eq!(out[12], Response::Applied);
                assert_tables_in(&sm.db());
                assert_eq!(sm.db().get("after12").unwrap(), Some(b"1".to_vec()));
                fs.power_loss(mode, seed * 17 + n as u64);
            });
            rt().block_on(async {
                let mut sm = StateMachine::open("/n/sm", mem_opts(&fs)).unwrap();
                let applied = sm.applied().0.map_or(0, |l| l.index);
                // The ingestion synced the WAL first: every entry before it is durable.
                assert!(applied >= 11, "entries before the ingestion lost: applied {applied}");
                recovered.push(applied);
                let db = sm.db();
                // Applied or not, the ingested tables are durable; the entry's batch only with its applied id.
                assert_tables_in(&db);
                assert_eq!(db.get("after12").unwrap().is_some(), applied >= 12);
                drop(db);
                let rest: Vec<_> = all.iter().skip(applied as usize + 1).cloned().collect();
                sm.apply(rest).await.unwrap();
                let db = sm.db();
                assert_tables_in(&db);
                assert_eq!(db.get("after12").unwrap(), Some(b"1".to_vec()));
                for i in (2..=30).filter(|&i| i != 12) {
                    assert!(db.get(format!("key{i:04}")).unwrap().is_some(), "key{i}");
                }
                assert!(fs.list(std::path::Path::new("/n/sm")).unwrap().iter().all(|n| !n.starts_with("ingest-")));
            });
        }
    }
    assert!(recovered.contains(&11), "no crash lost the entry after its ingestion: {recovered:?}");
}

#[test]
fn a_proposal_whose_table_does_not_read_is_rejected_whole() {
    let dir = tempfile::tempdir().unwrap();
    let mut batch = WriteBatch::new();
    batch.put("with-bad-table", "1");
    let mut torn = table(0..100);
    torn.truncate(torn.len() / 2);
    let mut overlapping = WriteBatch::new();
    overlapping.put("with-overlap", "1");
    rt().block_on(async {
        let mut sm = StateMachine::open(dir.path().join("sm"), Options::default()).unwrap();
        let out = sm
            .apply([
                Entry {
                    log_id: log_id(1, 1),
                    payload: EntryPayload::Normal(Proposal::with_tables(&batch, vec![table(0..10), torn])),
                },
                Entry {
                    log_id: log_id(1, 2),
                    payload: EntryPayload::Normal(Proposal::with_tables(
                        &overlapping,
                        vec![table(0..10), table(5..20)],
                    )),
                },
                put_entry(1, 3),
            ])
            .await
            .unwrap();
        assert!(matches!(&out[0], Response::Rejected { reason } if reason.contains("ingesting")), "{out:?}");
        assert!(matches!(&out[1], Response::Rejected { reason } if reason.contains("overlap")), "{out:?}");
        assert_eq!(out[2], Response::Applied);
        assert_eq!(sm.applied().0, Some(log_id(1, 3)));
        let db = sm.db();
        for k in ["with-bad-table", "with-overlap", "t00000"] {
            assert_eq!(db.get(k).unwrap(), None, "{k}: a rejected proposal applies nothing");
        }
        assert_eq!(db.get("key0003").unwrap(), Some(b"value3".to_vec()));
    });
}
