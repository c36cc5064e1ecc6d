//! Replicated stores in temporary directories, with each kind of damage
//! done to each copy in turn.

use super::*;

struct Scratch(PathBuf);

impl Scratch {
    fn new(name: &str) -> Scratch {
        let dir = std::env::temp_dir().join(format!("resmpi-io-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

const BLOCK: u64 = 64;

fn pattern(length: usize, seed: u8) -> Vec<u8> {
    (0..length)
        .map(|i| (i as u8).wrapping_mul(31).wrapping_add(seed))
        .collect()
}

fn setup(scratch: &Scratch, factor: u32, targets: usize) -> (PathBuf, Vec<PathBuf>) {
    let targets: Vec<PathBuf> = (0..targets)
        .map(|n| {
            let dir = scratch.0.join(format!("target{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            dir
        })
        .collect();
    let path = scratch.0.join("data");
    let layout = ReplicaLayout::new(factor, BLOCK, targets.clone()).unwrap();
    let mut store = Store::open(
        &path,
        &OpenRequest {
            read: true,
            write: true,
            create: true,
            exclusive: false,
            replication: Some(layout),
        },
    )
    .unwrap();
    store.write_at(0, &pattern(1000, 7)).unwrap();
    assert!(store.repairs.is_empty());
    (path, targets)
}

fn reopen(path: &Path) -> Store {
    Store::open(
        path,
        &OpenRequest {
            read: true,
            write: true,
            ..OpenRequest::default()
        },
    )
    .unwrap()
}

fn read_all(store: &mut Store) -> Vec<u8> {
    let mut buffer = vec![0u8; 2000];
    let read = store.read_at(0, &mut buffer).unwrap();
    buffer.truncate(read);
    buffer
}

#[derive(Clone, Copy, Debug)]
enum Fault {
    Delete,
    Truncate,
    FlipBytes,
    FlipChecksum,
    DirectoryBecomesFile,
}

fn damage(path: &Path, fault: Fault) {
    let checksums = if path
        .file_name()
        .unwrap()
        .to_string_lossy()
        .starts_with("data")
        && path.parent().unwrap().join("data") == path
    {
        path.with_file_name(".data.resmpi-crc")
    } else {
        with_suffix(path, ".crc")
    };
    match fault {
        Fault::Delete => {
            std::fs::remove_file(path).unwrap();
            std::fs::remove_file(&checksums).unwrap();
        }
        Fault::Truncate => {
            OpenOptions::new()
                .write(true)
                .open(path)
                .unwrap()
                .set_len(100)
                .unwrap();
        }
        Fault::FlipBytes => {
            let mut bytes = std::fs::read(path).unwrap();
            for byte in bytes.iter_mut().step_by(97) {
                *byte ^= 0x5a;
            }
            std::fs::write(path, bytes).unwrap();
        }
        Fault::FlipChecksum => {
            let mut bytes = std::fs::read(&checksums).unwrap();
            bytes[12] ^= 1;
            std::fs::write(&checksums, bytes).unwrap();
        }
        Fault::DirectoryBecomesFile => {
            let dir = path.parent().unwrap();
            std::fs::remove_dir_all(dir).unwrap();
            std::fs::write(dir, b"not a directory").unwrap();
        }
    }
}

#[test]
fn every_fault_on_every_copy_reads_back_and_repairs_once() {
    for factor in [2u32, 3] {
        for fault in [
            Fault::Delete,
            Fault::Truncate,
            Fault::FlipBytes,
            Fault::FlipChecksum,
            Fault::DirectoryBecomesFile,
        ] {
            for victim in 0..factor as usize {
                let scratch = Scratch::new(&format!("fault-{factor}-{victim}-{fault:?}"));
                let (path, targets) = setup(&scratch, factor, factor as usize - 1);
                let names = FileNames::new(&path, &targets);
                let victim_path = if victim == 0 {
                    if matches!(fault, Fault::DirectoryBecomesFile) {
                        continue; // the primary's directory holds the test itself
                    }
                    names.primary.clone()
                } else {
                    names.replicas[victim - 1].clone()
                };
                damage(&victim_path, fault);
                let mut store = reopen(&path);
                store.verify_all_copies = true;
                assert_eq!(
                    read_all(&mut store),
                    pattern(1000, 7),
                    "R={factor} {fault:?} copy {victim}"
                );
                assert!(
                    !store.repairs.is_empty(),
                    "R={factor} {fault:?} copy {victim}: nothing found"
                );
                let unrepairable = matches!(fault, Fault::DirectoryBecomesFile);
                assert!(store
                    .repairs
                    .iter()
                    .all(|repair| repair.repaired != unrepairable));
                if unrepairable {
                    let dir = victim_path.parent().unwrap();
                    std::fs::remove_file(dir).unwrap();
                    std::fs::create_dir(dir).unwrap();
                    let mut store = reopen(&path);
                    store.scrub(true).unwrap();
                }
                let mut again = reopen(&path);
                again.verify_all_copies = true;
                assert_eq!(read_all(&mut again), pattern(1000, 7));
                assert!(
                    again.repairs.is_empty(),
                    "R={factor} {fault:?} copy {victim}: {:?}",
                    again.repairs
                );
                assert!(again.scrub(false).unwrap().is_empty());
            }
        }
    }
}

#[test]
fn primary_fault_is_found_by_a_plain_read() {
    let scratch = Scratch::new("plain-read");
    let (path, _) = setup(&scratch, 2, 1);
    damage(&path, Fault::FlipBytes);
    let mut store = reopen(&path);
    assert_eq!(read_all(&mut store), pattern(1000, 7));
    assert!(store
        .repairs
        .iter()
        .all(|repair| repair.copy == 0 && repair.repaired));
    assert!(!store.repairs.is_empty());
    // The primary is again byte-identical to an unreplicated write.
    assert_eq!(std::fs::read(&path).unwrap(), pattern(1000, 7));
}

#[test]
fn all_copies_damaged_is_an_error_not_wrong_data() {
    let scratch = Scratch::new("all-bad");
    let (path, targets) = setup(&scratch, 2, 1);
    let names = FileNames::new(&path, &targets);
    damage(&path, Fault::FlipBytes);
    damage(&names.replicas[0], Fault::FlipBytes);
    let mut store = reopen(&path);
    let mut buffer = vec![0u8; 1000];
    assert!(store.read_at(0, &mut buffer).is_err());
}

#[test]
fn every_copy_of_a_block_missing_is_an_error_not_zeros() {
    // R = 2 over two targets: target 0 holds copy 1 of the even blocks.
    let scratch = Scratch::new("all-missing");
    let (path, targets) = setup(&scratch, 2, 2);
    let names = FileNames::new(&path, &targets);
    damage(&names.replicas[0], Fault::Delete);
    damage(&path, Fault::Delete);
    let mut store = reopen(&path);
    let mut buffer = vec![0u8; 1000];
    let error = store.read_at(0, &mut buffer).unwrap_err();
    assert!(error.to_string().contains("no intact copy"), "{error}");
    // The odd blocks are still there.
    assert_eq!(
        store.read_at(BLOCK, &mut buffer[..BLOCK as usize]).unwrap(),
        BLOCK as usize
    );
    assert_eq!(
        &buffer[..BLOCK as usize],
        &pattern(1000, 7)[BLOCK as usize..2 * BLOCK as usize]
    );
}

#[test]
fn a_copy_not_yet_extended_by_another_writer_is_no_lost_block() {
    // Another process extending the file has written the primary and not
    // yet the replicas: a never-written block past the replicas' end is a
    // hole, not a block every copy of which is lost.
    let scratch = Scratch::new("extending");
    let (path, _) = setup(&scratch, 3, 2);
    OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(5000)
        .unwrap();
    let mut store = reopen(&path);
    store.write_at(3000, b"partial").unwrap();
    let mut buffer = vec![9u8; 20];
    store.read_at(2995, &mut buffer).unwrap();
    assert_eq!(&buffer[..5], &[0u8; 5]);
    assert_eq!(&buffer[5..12], b"partial");
}

#[test]
fn never_written_blocks_read_as_zeros() {
    let scratch = Scratch::new("holes");
    let (path, _) = setup(&scratch, 2, 1);
    let mut store = reopen(&path);
    store.write_at(100 * BLOCK, b"end").unwrap();
    store.verify_all_copies = true;
    let mut buffer = vec![1u8; BLOCK as usize];
    assert_eq!(
        store.read_at(50 * BLOCK + 3, &mut buffer).unwrap(),
        BLOCK as usize
    );
    assert!(buffer.iter().all(|byte| *byte == 0));
    assert!(store.repairs.is_empty(), "{:?}", store.repairs);
}

#[test]
fn partial_block_writes_keep_their_neighbours() {
    let scratch = Scratch::new("partial");
    let (path, _) = setup(&scratch, 3, 4);
    let mut store = reopen(&path);
    let mut expected = pattern(1000, 7);
    for (offset, length, seed) in [
        (10usize, 5usize, 1u8),
        (60, 10, 2),
        (127, 130, 3),
        (990, 30, 4),
    ] {
        let data = pattern(length, seed);
        store.write_at(offset as u64, &data).unwrap();
        if expected.len() < offset + length {
            expected.resize(offset + length, 0);
        }
        expected[offset..offset + length].copy_from_slice(&data);
    }
    assert_eq!(read_all(&mut store), expected);
    store.verify_all_copies = true;
    assert_eq!(read_all(&mut store), expected);
    assert!(store.repairs.is_empty(), "{:?}", store.repairs);
    // Truncate into a block, then extend: the tail reads as zeros.
    store.set_len(150).unwrap();
    store.set_len(300).unwrap();
    expected.truncate(150);
    expected.resize(300, 0);
    assert_eq!(read_all(&mut store), expected);
    assert!(store.scrub(false).unwrap().is_empty());
    assert_eq!(std::fs::read(&path).unwrap(), expected);
}

#[test]
fn pieces_update_each_block_once_and_keep_the_bytes_between() {
    let scratch = Scratch::new("pieces");
    let (path, _) = setup(&scratch, 3, 2);
    let mut store = reopen(&path);
    let mut expected = pattern(1000, 7);
    // Every 10th byte over 1500 bytes (past the old end), then a far piece.
    let ones = [1u8; 1];
    let mut pieces: Vec<(u64, &[u8])> = (0..150).map(|i| (i * 10, &ones[..])).collect();
    let far = pattern(100, 9);
    pieces.push((40 * BLOCK + 3, &far[..]));
    store.write_pieces(&pieces).unwrap();
    expected.resize((40 * BLOCK + 103) as usize, 0);
    for i in 0..150 {
        expected[i * 10] = 1;
    }
    expected[(40 * BLOCK + 3) as usize..].copy_from_slice(&far);
    store.verify_all_copies = true;
    let mut buffer = vec![0u8; 4000];
    let read = store.read_at(0, &mut buffer).unwrap();
    assert_eq!(&buffer[..read], &expected[..]);
    assert!(store.repairs.is_empty(), "{:?}", store.repairs);
}

#[test]
fn metadata_survives_without_hints_and_delete_removes_everything() {
    let scratch = Scratch::new("metadata");
    let (path, targets) = setup(&scratch, 2, 2);
    let store = reopen(&path);
    assert_eq!(store.layout().unwrap().replication_factor, 2);
    drop(store);
    delete(&path).unwrap();
    for target in targets {
        assert_eq!(std::fs::read_dir(target).unwrap().count(), 0);
    }
    assert_eq!(std::fs::read_dir(&scratch.0).unwrap().count(), 2);
}

#[test]
fn a_new_file_ignores_copies_left_by_an_old_one_of_the_same_name() {
    let scratch = Scratch::new("stale");
    let (path, targets) = setup(&scratch, 2, 1);
    // Removed behind the library's back: the replica and its checksums stay.
    std::fs::remove_file(&path).unwrap();
    std::fs::remove_file(path.with_file_name(".data.resmpi-meta")).unwrap();
    std::fs::remove_file(path.with_file_name(".data.resmpi-crc")).unwrap();
    let layout = ReplicaLayout::new(2, BLOCK, targets).unwrap();
    let mut store = Store::open(
        &path,
        &OpenRequest {
            read: true,
            write: true,
            create: true,
            exclusive: false,
            replication: Some(layout),
        },
    )
    .unwrap();
    store.write_at(10, b"new").unwrap();
    store.verify_all_copies = true;
    let mut buffer = vec![7u8; 13];
    assert_eq!(store.read_at(0, &mut buffer).unwrap(), 13);
    assert_eq!(&buffer, b"\0\0\0\0\0\0\0\0\0\0new");
    assert!(store.repairs.is_empty(), "{:?}", store.repairs);
}

#[test]
fn lost_primary_is_rebuilt() {
    let scratch = Scratch::new("lost-primary");
    let (path, _) = setup(&scratch, 2, 1);
    std::fs::remove_file(&path).unwrap();
    let mut store = reopen(&path);
    assert_eq!(read_all(&mut store), pattern(1000, 7));
    assert_eq!(std::fs::read(&path).unwrap(), pattern(1000, 7));
}

#[test]
fn held_changes_are_made_only_when_applied_and_counted_once() {
    let scratch = Scratch::new("held");
    let (path, _) = setup(&scratch, 2, 1);
    let before = read_all(&mut reopen(&path));
    // Held: nothing reaches the file, nothing counts as written.
    let mut follower = reopen(&path);
    follower.hold_changes(1 << 20);
    follower
        .write_pieces(&[(10, &[1u8; 5][..]), (500, &[2u8; 7][..])])
        .unwrap();
    follower.set_len(2000).unwrap();
    let held = follower.take_held();
    assert_eq!(held.len(), 3);
    assert_eq!(read_all(&mut reopen(&path)), before);
    assert_eq!(follower.write_counts(), (0, 0));
    // Left to another process that made them: counted as left, not written.
    follower.drop_held(held.clone());
    assert_eq!(follower.write_counts(), (0, 12));
    // Applied: the file is what the writes make, copies in agreement.
    follower.apply_held(held).unwrap();
    let mut expected = before.clone();
    expected[10..15].fill(1);
    expected[500..507].fill(2);
    expected.resize(2000, 0);
    let mut check = reopen(&path);
    assert_eq!(read_all(&mut check), expected);
    assert_eq!(check.scrub(false).unwrap(), vec![]);
    assert_eq!(follower.write_counts(), (12, 12));
}

#[test]
fn writes_past_the_held_bound_are_made_at_once() {
    let scratch = Scratch::new("held-bound");
    let path = scratch.0.join("plain");
    let mut store = Store::open(
        &path,
        &OpenRequest {
            read: true,
            write: true,
            create: true,
            ..OpenRequest::default()
        },
    )
    .unwrap();
    store.hold_changes(8);
    store.write_at(0, &[9u8; 6]).unwrap(); // held: 6 of 8
    store.write_at(100, &[8u8; 6]).unwrap(); // 12 > 8: made at once
    assert_eq!(store.take_held().len(), 1);
    let bytes = read_all(&mut reopen(&path));
    assert_eq!(bytes.len(), 106);
    assert_eq!(&bytes[100..106], &[8u8; 6]);
    assert_eq!(&bytes[0..6], &[0u8; 6]);
    assert_eq!(store.write_counts(), (6, 0));
}
