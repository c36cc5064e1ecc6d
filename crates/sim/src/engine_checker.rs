//! The oracle of simulated engine jobs: judges what the production engine
//! reports (request statuses, receive buffers, collective results) against
//! the plan.
//!
//! Why it only looks at what MPI exposes: a checker that reads the engine's
//! internals would share its blind spots. What it sees is what an
//! application sees — a status and the bytes in its buffer — plus when
//! each receive was posted, was first seen matched, and completed,
//! counted in engine calls on that rank (the driver notes them after every
//! call). That is enough to judge:
//! - every message delivered exactly once or cancelled by its sender, never
//!   both, never neither; its payload intact; its status (source, tag,
//!   count) right; a cancelled receive's buffer untouched;
//! - the receive's pattern allowed the message;
//! - non-overtaking: if two messages from one sender both fit a receive,
//!   that receive cannot get the second while the first goes to a receive
//!   posted after it;
//! - posted-receive order: a message goes to the oldest posted receive it
//!   fits (checked where the call counts make the order certain);
//! - a synchronous send completes only once its message has matched;
//! - collectives give the right values, and no barrier completes before
//!   every rank has entered it.
//!
//! After a rank dies ([`EngineChecker::rank_died`]) and each survivor is
//! told ([`EngineChecker::notice_arrived`]), the rules bend exactly as far
//! as MPI's fault-tolerance chapter lets them, and no further:
//! - a message from the dead rank is delivered at most once and intact, or
//!   not at all, and never if its frame reached the survivor only after the
//!   survivor's notice; a message to the dead rank may be lost, and its
//!   sender's request ends normally or with error 101 (PROC_FAILED);
//! - error 101 is legitimate only on a survivor that has been told, and
//!   only for a send to the dead rank, a receive naming it, a wildcard
//!   receive that was pending when the notice came (it must end in the
//!   notice call itself), and a collective on WORLD; anything else ending
//!   with 101 is a failure, and so is a pending wildcard receive or a
//!   receive naming the dead rank that survives its notice;
//! - a collective that ends after the death has its result unchecked (a
//!   survivor may succeed with partial data from a partner whose own step
//!   with the dead rank failed), but a collective that needs a rank which
//!   died before starting it cannot succeed everywhere: some survivor must
//!   report the death.
//!
//! Every check returns a description of the violation instead of panicking,
//! so the driver can report the seed.

use crate::engine_plan::{
    allreduce_input, bcast_data, payload_byte, Plan, PlannedCollective, PlannedMessage,
    PlannedMode, PlannedPattern, MESSAGE_BYTES_MIN,
};

/// Byte every receive buffer is filled with before it is posted: what a
/// receive did not write still holds it.
pub const SENTINEL_BYTE: u8 = 0xA5;

/// What the application sees of a completed request (a
/// `resmpi_core::Status` in plain fields).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SeenStatus {
    /// Source (comm rank == world rank on WORLD), or -1.
    pub source: i32,
    /// Tag, or -1.
    pub tag: i32,
    /// MPI error class (0 = success).
    pub error: i32,
    /// Bytes received or sent.
    pub count_bytes: usize,
    /// Whether the operation was cancelled.
    pub cancelled: bool,
}

/// One receive a rank posted, with the calls that bracket its life.
#[derive(Clone, Debug)]
pub struct ReceiveRecord {
    /// What it matches.
    pub pattern: PlannedPattern,
    /// Engine call (on this rank) that posted it.
    pub posted_call: u64,
    /// First engine call after which it was seen matched.
    pub matched_call: Option<u64>,
    /// Engine call after which it was seen complete.
    pub completed_call: Option<u64>,
    /// The message it got.
    pub message: Option<usize>,
    /// Whether it completed cancelled.
    pub cancelled: bool,
}

/// MPIX_ERR_PROC_FAILED: the operation needed a process that died.
pub const PROC_FAILED: i32 = 101;

/// How a send request ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SendOutcome {
    /// Completed normally.
    Sent,
    /// Completed cancelled.
    Cancelled,
    /// Completed with PROC_FAILED: its destination died.
    Failed,
}

/// The rank that died, and when.
#[derive(Clone, Copy, Debug)]
struct Death {
    rank: u32,
    step: u64,
}

/// State of the oracle for one job.
#[derive(Debug)]
pub struct EngineChecker {
    plan: Plan,
    /// `delivered[message]`: (rank, receive ordinal) that got it.
    delivered: Vec<Option<(u32, usize)>>,
    /// `send_outcome[message]`: how the send ended, once it did.
    send_outcome: Vec<Option<SendOutcome>>,
    /// `receives[rank]`: every receive it posted, in posting order.
    receives: Vec<Vec<ReceiveRecord>>,
    /// `collective_started[index][rank]`: global step at which the rank
    /// started collective `index`.
    collective_started: Vec<Vec<Option<u64>>>,
    /// `collective_error[index][rank]`: the error it ended with there.
    collective_error: Vec<Vec<Option<i32>>>,
    /// The rank that died, if one did.
    death: Option<Death>,
    /// `notice_call[rank]`: engine call on that rank in which it was told
    /// of the death.
    notice_call: Vec<Option<u64>>,
    /// `undeliverable[message]`: a message from the dead rank whose frame
    /// reached its destination only after the destination was told.
    undeliverable: Vec<bool>,
}

impl EngineChecker {
    /// An oracle for `plan`.
    pub fn new(plan: &Plan) -> EngineChecker {
        let rank_count = plan.programs.len();
        EngineChecker {
            delivered: vec![None; plan.messages.len()],
            send_outcome: vec![None; plan.messages.len()],
            receives: vec![Vec::new(); rank_count],
            collective_started: vec![vec![None; rank_count]; plan.collectives.len()],
            collective_error: vec![vec![None; rank_count]; plan.collectives.len()],
            death: None,
            notice_call: vec![None; rank_count],
            undeliverable: vec![false; plan.messages.len()],
            plan: plan.clone(),
        }
    }

    /// Rank `rank` died at global step `step`: from now on its messages
    /// need not arrive, and messages to it may be lost.
    pub fn rank_died(&mut self, rank: u32, step: u64) {
        assert!(self.death.is_none(), "one death per job");
        self.death = Some(Death { rank, step });
    }

    /// Whether `rank` is the rank that died.
    fn is_dead(&self, rank: u32) -> bool {
        self.death.is_some_and(|death| death.rank == rank)
    }

    /// Survivor `rank` was told of the death in its engine call `call`;
    /// `late_messages` are messages from the dead rank whose frames had not
    /// reached its engine yet (they must never be delivered).
    pub fn notice_arrived(&mut self, rank: u32, call: u64, late_messages: &[usize]) {
        self.notice_call[rank as usize] = Some(call);
        for &number in late_messages {
            self.undeliverable[number] = true;
        }
    }

    /// After the notice call of `rank`: every receive that needed the dead
    /// rank and was pending — one naming it, or a wildcard one not yet
    /// matched — has ended.
    pub fn check_notice_took_effect(&self, rank: u32) -> Result<(), String> {
        let (Some(death), Some(notice_call)) = (self.death, self.notice_call[rank as usize]) else {
            return Ok(());
        };
        for (ordinal, record) in self.receives[rank as usize].iter().enumerate() {
            if record.completed_call.is_some() || record.posted_call >= notice_call {
                continue;
            }
            let pattern = record.pattern;
            if pattern.source == Some(death.rank) {
                return Err(format!(
                    "rank {rank} receive #{ordinal} ({pattern:?}) names rank {} but is still \
                     open after rank {rank} was told of its death (call {notice_call})",
                    death.rank
                ));
            }
            if pattern.source.is_none() && record.matched_call.is_none() {
                return Err(format!(
                    "rank {rank} wildcard receive #{ordinal} ({pattern:?}) was pending when rank \
                     {rank} was told (call {notice_call}) that rank {} died, but it did not end \
                     with error {PROC_FAILED}",
                    death.rank
                ));
            }
        }
        Ok(())
    }

    /// Rank `rank` posted a receive during its engine call `call`; returns
    /// its ordinal.
    pub fn receive_posted(&mut self, rank: u32, pattern: PlannedPattern, call: u64) -> usize {
        let receives = &mut self.receives[rank as usize];
        receives.push(ReceiveRecord {
            pattern,
            posted_call: call,
            matched_call: None,
            completed_call: None,
            message: None,
            cancelled: false,
        });
        receives.len() - 1
    }

    /// Receive `ordinal` of `rank` was first seen matched after call `call`.
    pub fn receive_matched(&mut self, rank: u32, ordinal: usize, call: u64) {
        let record = &mut self.receives[rank as usize][ordinal];
        record.matched_call.get_or_insert(call);
    }

    /// Whether receive `ordinal` of `rank` has been seen matched.
    pub fn is_matched(&self, rank: u32, ordinal: usize) -> bool {
        self.receives[rank as usize][ordinal].matched_call.is_some()
    }

    /// Receive `ordinal` of `rank` completed after call `call` with
    /// `status`, leaving `buffer`.
    pub fn receive_completed(
        &mut self,
        rank: u32,
        ordinal: usize,
        call: u64,
        status: SeenStatus,
        buffer: &[u8],
    ) -> Result<(), String> {
        let record = &mut self.receives[rank as usize][ordinal];
        record.completed_call = Some(call);
        let pattern = record.pattern;
        let what = format!("rank {rank} receive #{ordinal} ({pattern:?})");
        if status.cancelled {
            record.cancelled = true;
            if record.matched_call.is_some() {
                return Err(format!("{what}: completed cancelled after it matched"));
            }
            if let Some(offset) = buffer.iter().position(|&byte| byte != SENTINEL_BYTE) {
                return Err(format!(
                    "{what}: completed cancelled but its buffer was written at byte {offset}"
                ));
            }
            return Ok(());
        }
        if status.error == PROC_FAILED {
            return self.receive_failure_allowed(rank, ordinal, call, &what);
        }
        let record = &mut self.receives[rank as usize][ordinal];
        record.matched_call.get_or_insert(call);
        if status.error != 0 {
            return Err(format!(
                "{what}: completed with error class {}",
                status.error
            ));
        }
        if status.count_bytes < MESSAGE_BYTES_MIN {
            return Err(format!(
                "{what}: count {} is shorter than any message",
                status.count_bytes
            ));
        }
        let number = u64::from_le_bytes(buffer[..8].try_into().expect("8 bytes")) as usize;
        let Some(&message) = self.plan.messages.get(number) else {
            return Err(format!(
                "{what}: buffer names message {number}, which does not exist (corrupt payload)"
            ));
        };
        let what = format!("{what} got message {number} ({message:?})");
        if message.destination != rank {
            return Err(format!("{what}: delivered to the wrong rank"));
        }
        if !pattern.fits(&message) {
            return Err(format!("{what}: the pattern does not allow it"));
        }
        if status.source != message.source as i32
            || status.tag != message.tag
            || status.count_bytes != message.length_bytes
        {
            return Err(format!(
                "{what}: status says source {} tag {} count {}",
                status.source, status.tag, status.count_bytes
            ));
        }
        for (offset, &byte) in buffer[..message.length_bytes].iter().enumerate() {
            if byte != payload_byte(self.plan.seed, number, offset) {
                return Err(format!("{what}: payload differs at byte {offset}"));
            }
        }
        if let Some(offset) = buffer[message.length_bytes..]
            .iter()
            .position(|&byte| byte != SENTINEL_BYTE)
        {
            return Err(format!(
                "{what}: written past the message at byte {}",
                message.length_bytes + offset
            ));
        }
        if self.undeliverable[number] {
            return Err(format!(
                "{what}: delivered after rank {rank} was told its sender died (its frame \
                 arrived after the notice)"
            ));
        }
        if let Some((other_rank, other)) = self.delivered[number] {
            return Err(format!(
                "{what}: delivered twice (rank {other_rank} receive #{other} got it before)"
            ));
        }
        if self.send_outcome[number] == Some(SendOutcome::Cancelled) {
            return Err(format!("{what}: delivered although its send was cancelled"));
        }
        self.delivered[number] = Some((rank, ordinal));
        self.receives[rank as usize][ordinal].message = Some(number);
        Ok(())
    }

    /// Receive `ordinal` of `rank` ended with PROC_FAILED in call `call`:
    /// legitimate only for a receive naming the dead rank, or a wildcard
    /// receive pending when the notice came, on a rank already told.
    fn receive_failure_allowed(
        &self,
        rank: u32,
        ordinal: usize,
        call: u64,
        what: &str,
    ) -> Result<(), String> {
        let record = &self.receives[rank as usize][ordinal];
        let (Some(death), Some(notice_call)) = (self.death, self.notice_call[rank as usize]) else {
            return Err(format!(
                "{what}: ended with error {PROC_FAILED} in call {call}, but rank {rank} had \
                 not been told of any death"
            ));
        };
        if call < notice_call {
            return Err(format!(
                "{what}: ended with error {PROC_FAILED} in call {call}, before rank {rank} was \
                 told of the death (call {notice_call})"
            ));
        }
        match record.pattern.source {
            Some(source) if source == death.rank => Ok(()),
            Some(source) => Err(format!(
                "{what}: ended with error {PROC_FAILED}, but it names rank {source}, which \
                 lives (rank {} died)",
                death.rank
            )),
            None if record.posted_call < notice_call && call == notice_call => Ok(()),
            None => Err(format!(
                "{what}: a wildcard receive posted in call {} ended with error {PROC_FAILED} \
                 in call {call}, but only one pending at the notice (call {notice_call}) may",
                record.posted_call
            )),
        }
    }

    /// The send of message `number` completed with `status` in its
    /// sender's engine call `call`.
    pub fn send_completed(
        &mut self,
        number: usize,
        call: u64,
        status: SeenStatus,
    ) -> Result<(), String> {
        let message = self.plan.messages[number];
        let what = format!(
            "rank {} send of message {number} ({message:?})",
            message.source
        );
        if self.send_outcome[number].is_some() {
            return Err(format!("{what}: completed twice"));
        }
        if status.error == PROC_FAILED {
            let notice_call = self.notice_call[message.source as usize];
            if !self.is_dead(message.destination) {
                return Err(format!(
                    "{what}: ended with error {PROC_FAILED}, but its destination lives"
                ));
            }
            if notice_call.is_none_or(|notice_call| call < notice_call) {
                return Err(format!(
                    "{what}: ended with error {PROC_FAILED} in call {call}, before rank {} was \
                     told of the death (notice call {notice_call:?})",
                    message.source
                ));
            }
            self.send_outcome[number] = Some(SendOutcome::Failed);
            return Ok(());
        }
        if status.error != 0 {
            return Err(format!(
                "{what}: completed with error class {}",
                status.error
            ));
        }
        if status.cancelled && self.delivered[number].is_some() {
            return Err(format!("{what}: cancelled although it was delivered"));
        }
        if !status.cancelled
            && message.mode == PlannedMode::Synchronous
            && self.delivered[number].is_none()
            && !self.matched_receive_could_hold(&message)
        {
            return Err(format!(
                "{what}: a synchronous send completed before any receive matched it"
            ));
        }
        self.send_outcome[number] = Some(if status.cancelled {
            SendOutcome::Cancelled
        } else {
            SendOutcome::Sent
        });
        Ok(())
    }

    /// Whether the destination has a receive seen matched, not yet
    /// complete, that this message could be in (rendezvous data still
    /// flowing).
    fn matched_receive_could_hold(&self, message: &PlannedMessage) -> bool {
        self.receives[message.destination as usize]
            .iter()
            .any(|record| {
                record.matched_call.is_some()
                    && record.completed_call.is_none()
                    && record.pattern.fits(message)
            })
    }

    /// Messages to `rank` that it still needs a receive for: neither
    /// delivered, nor cancelled by their sender, nor from the dead rank,
    /// less the receives seen matched that have not completed yet (each
    /// holds one arriving message).
    pub fn unclaimed(&self, rank: u32) -> usize {
        let needed = (0..self.plan.messages.len())
            .filter(|&number| {
                let message = &self.plan.messages[number];
                message.destination == rank && self.still_needed(number)
            })
            .count();
        let holding = self.receives[rank as usize]
            .iter()
            .filter(|record| record.matched_call.is_some() && record.completed_call.is_none())
            .count();
        needed.saturating_sub(holding)
    }

    /// Message `number` must still be delivered: not yet delivered, not
    /// cancelled, and between two ranks that live.
    fn still_needed(&self, number: usize) -> bool {
        let message = &self.plan.messages[number];
        self.delivered[number].is_none()
            && self.send_outcome[number] != Some(SendOutcome::Cancelled)
            && !self.is_dead(message.source)
            && !self.is_dead(message.destination)
    }

    /// Whether every message that must arrive is delivered or cancelled.
    pub fn all_accounted(&self) -> bool {
        (0..self.plan.messages.len()).all(|number| !self.still_needed(number))
    }

    /// Rank `rank` started collective `index` at global step `step`.
    pub fn collective_started(&mut self, index: usize, rank: u32, step: u64) {
        self.collective_started[index][rank as usize] = Some(step);
    }

    /// Collective `index` completed on `rank` at global step `step` with
    /// `error` (0 = success) and left `result` (the allreduce's output or
    /// the broadcast buffer; empty for a barrier).
    pub fn collective_completed(
        &mut self,
        index: usize,
        rank: u32,
        step: u64,
        error: i32,
        result: &[u8],
    ) -> Result<(), String> {
        let collective = self.plan.collectives[index];
        let what = format!("rank {rank} collective {index} ({collective:?})");
        if self.collective_error[index][rank as usize].is_some() {
            return Err(format!("{what}: completed twice"));
        }
        self.collective_error[index][rank as usize] = Some(error);
        if error == PROC_FAILED {
            // Legitimate once this rank was told, or once the death happened
            // at all: a partner whose own step with the dead rank failed
            // passes on flagged data (FLAG_FAILURE_TAINTED), which fails
            // this rank's collective before its own notice arrives.
            let died_before = self.death.is_some_and(|death| step >= death.step);
            if self.notice_call[rank as usize].is_none() && !died_before {
                return Err(format!(
                    "{what}: ended with error {PROC_FAILED} at step {step}, but rank {rank} \
                     had not been told of any death"
                ));
            }
            return Ok(());
        }
        if error != 0 {
            return Err(format!("{what}: completed with error class {error}"));
        }
        // A success is a success even after a death: data computed after a
        // lost contribution travels flagged and fails the collective, so a
        // survivor that succeeds must hold the right result.
        match collective {
            PlannedCollective::Barrier => {
                let absent: Vec<usize> = self.collective_started[index]
                    .iter()
                    .enumerate()
                    .filter(|(_, started)| started.is_none_or(|started| started > step))
                    .map(|(rank, _)| rank)
                    .collect();
                if !absent.is_empty() {
                    return Err(format!(
                        "{what}: completed at step {step} before ranks {absent:?} entered it"
                    ));
                }
            }
            PlannedCollective::Allreduce { count } => {
                let mut expected = vec![0u64; count];
                for contributor in 0..self.plan.programs.len() as u32 {
                    let input = allreduce_input(self.plan.seed, index, contributor, count);
                    for (sum, value) in expected.iter_mut().zip(input) {
                        *sum = sum.wrapping_add(value);
                    }
                }
                let got: Vec<u64> = result
                    .chunks_exact(8)
                    .map(|chunk| u64::from_ne_bytes(chunk.try_into().expect("8 bytes")))
                    .collect();
                if got != expected {
                    let element = got
                        .iter()
                        .zip(&expected)
                        .position(|(got, expected)| got != expected);
                    return Err(format!(
                        "{what}: wrong sum (first wrong element {element:?} of {count})"
                    ));
                }
            }
            PlannedCollective::Bcast { length_bytes, .. } => {
                let expected = bcast_data(self.plan.seed, index, length_bytes);
                if let Some(offset) = result
                    .iter()
                    .zip(expected.iter())
                    .position(|(got, expected)| got != expected)
                {
                    return Err(format!("{what}: broadcast data differs at byte {offset}"));
                }
            }
        }
        Ok(())
    }

    /// End of job: nothing lost, no death hidden, and the order rules held.
    pub fn finish(&self) -> Result<(), String> {
        for (number, message) in self.plan.messages.iter().enumerate() {
            let outcome = self.send_outcome[number];
            let delivered = self.delivered[number];
            if delivered.is_some() && outcome == Some(SendOutcome::Cancelled) {
                return Err(format!(
                    "message {number} ({message:?}) delivered but its send was cancelled"
                ));
            }
            if self.is_dead(message.source) || self.is_dead(message.destination) {
                // From the dead rank: at most once (checked at delivery) or
                // not at all. To it: may be lost; its survivor sender's
                // request ended (the quiet check saw every request released).
                continue;
            }
            match (delivered, outcome) {
                (None, Some(SendOutcome::Cancelled)) | (Some(_), Some(SendOutcome::Sent)) => {}
                (None, _) => {
                    return Err(format!(
                        "message {number} ({message:?}) lost: never delivered, send outcome \
                         {outcome:?}"
                    ))
                }
                (Some(_), outcome) => {
                    return Err(format!(
                        "message {number} ({message:?}) delivered but its send ended {outcome:?}"
                    ))
                }
            }
        }
        self.check_no_death_hidden()?;
        for rank in 0..self.receives.len() as u32 {
            self.check_non_overtaking(rank)?;
            self.check_posted_order(rank)?;
        }
        Ok(())
    }

    /// A collective that needs the dead rank's part (a barrier, an
    /// allreduce, a broadcast from it) and that it died before starting
    /// cannot have succeeded on every survivor: some survivor waited for it
    /// and must report the death.
    fn check_no_death_hidden(&self) -> Result<(), String> {
        let Some(death) = self.death else {
            return Ok(());
        };
        for (index, collective) in self.plan.collectives.iter().enumerate() {
            let needs_dead = match *collective {
                PlannedCollective::Barrier | PlannedCollective::Allreduce { .. } => true,
                PlannedCollective::Bcast { root, .. } => root == death.rank,
            };
            if !needs_dead || self.collective_started[index][death.rank as usize].is_some() {
                continue;
            }
            let survivors: Vec<Option<i32>> = self.collective_error[index]
                .iter()
                .enumerate()
                .filter(|&(rank, _)| rank as u32 != death.rank)
                .map(|(_, error)| *error)
                .collect();
            if survivors.iter().all(|error| *error == Some(0)) {
                return Err(format!(
                    "collective {index} ({collective:?}): rank {} died (step {}) before starting \
                     it, yet every survivor reports success: the death was hidden",
                    death.rank, death.step
                ));
            }
        }
        Ok(())
    }

    /// If messages `earlier` < `later` from one sender both fit the receive
    /// that got `later`, `earlier` must have gone to that receive or an
    /// older one (it arrived first).
    fn check_non_overtaking(&self, rank: u32) -> Result<(), String> {
        let receives = &self.receives[rank as usize];
        for (later_ordinal, later_record) in receives.iter().enumerate() {
            let Some(later) = later_record.message else {
                continue;
            };
            let later_message = self.plan.messages[later];
            for (earlier, earlier_message) in self.plan.messages.iter().enumerate() {
                let overtaken = earlier_message.source == later_message.source
                    && earlier_message.destination == rank
                    && earlier_message.index < later_message.index
                    && later_record.pattern.fits(earlier_message);
                if !overtaken {
                    continue;
                }
                if let Some((_, earlier_ordinal)) = self.delivered[earlier] {
                    if earlier_ordinal > later_ordinal {
                        return Err(format!(
                            "non-overtaking broken on rank {rank}: receive #{later_ordinal} \
                             ({:?}) got message {later} (index {}) while the earlier message \
                             {earlier} (index {}) from the same sender, which it also fits, \
                             went to the later receive #{earlier_ordinal}",
                            later_record.pattern, later_message.index, earlier_message.index
                        ));
                    }
                }
            }
        }
        Ok(())
    }

    /// A receive that got message m in call t: no older receive that fits
    /// m may have stayed open (unmatched, not cancelled) throughout call t.
    fn check_posted_order(&self, rank: u32) -> Result<(), String> {
        let receives = &self.receives[rank as usize];
        for (newer_ordinal, newer) in receives.iter().enumerate() {
            let (Some(number), Some(call)) = (newer.message, newer.matched_call) else {
                continue;
            };
            let message = self.plan.messages[number];
            for (older_ordinal, older) in receives[..newer_ordinal].iter().enumerate() {
                // Open: posted before, and neither matched nor completed
                // (cancelled, or in error once peers can fail) until after.
                let open_throughout = older.posted_call < call
                    && older.matched_call.is_none_or(|matched| matched > call)
                    && older
                        .completed_call
                        .is_none_or(|completed| completed > call);
                if open_throughout && older.pattern.fits(&message) {
                    return Err(format!(
                        "posted-receive order broken on rank {rank}: message {number} \
                         ({message:?}) went to receive #{newer_ordinal} ({:?}) during call \
                         {call} while the older receive #{older_ordinal} ({:?}, posted in call \
                         {}) was open and fits it",
                        newer.pattern, older.pattern, older.posted_call
                    ));
                }
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine_plan::{payload, Action};

    /// Rank 0 sends two tag-0 messages to rank 1.
    fn two_message_plan() -> Plan {
        let message = |index| PlannedMessage {
            source: 0,
            destination: 1,
            index,
            tag: 0,
            length_bytes: 16,
            mode: PlannedMode::Standard,
        };
        Plan {
            seed: 3,
            messages: vec![message(0), message(1)],
            collectives: Vec::new(),
            programs: vec![
                vec![Action::Send { message: 0 }, Action::Send { message: 1 }],
                Vec::new(),
            ],
        }
    }

    fn delivered(checker: &mut EngineChecker, ordinal: usize, number: usize, call: u64) {
        let mut buffer = vec![SENTINEL_BYTE; 64];
        buffer[..16].copy_from_slice(&payload(3, number, 16));
        let status = SeenStatus {
            source: 0,
            tag: 0,
            error: 0,
            count_bytes: 16,
            cancelled: false,
        };
        checker
            .receive_completed(1, ordinal, call, status, &buffer)
            .unwrap();
    }

    fn sent(checker: &mut EngineChecker) {
        let status = SeenStatus {
            source: -1,
            tag: -1,
            error: 0,
            count_bytes: 16,
            cancelled: false,
        };
        checker.send_completed(0, 10, status).unwrap();
        checker.send_completed(1, 10, status).unwrap();
    }

    #[test]
    fn messages_in_send_order_to_receives_in_posting_order_pass() {
        let mut checker = EngineChecker::new(&two_message_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 1);
        checker.receive_posted(1, PlannedPattern::ANY, 2);
        delivered(&mut checker, 0, 0, 3);
        delivered(&mut checker, 1, 1, 4);
        sent(&mut checker);
        checker.finish().unwrap();
    }

    #[test]
    fn the_second_message_reaching_the_older_receive_is_overtaking() {
        let mut checker = EngineChecker::new(&two_message_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 1);
        checker.receive_posted(1, PlannedPattern::ANY, 2);
        delivered(&mut checker, 1, 0, 3);
        delivered(&mut checker, 0, 1, 4);
        sent(&mut checker);
        let error = checker.finish().unwrap_err();
        assert!(error.contains("non-overtaking broken"), "{error}");
    }

    #[test]
    fn a_message_taken_by_a_newer_receive_while_an_older_one_waits_is_reported() {
        let mut checker = EngineChecker::new(&two_message_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 1);
        checker.receive_posted(1, PlannedPattern::ANY, 2);
        // Receive #1 takes message 0 in call 3; receive #0 is cancelled in
        // call 5, so it was open (and fits) throughout call 3.
        delivered(&mut checker, 1, 0, 3);
        let cancelled = SeenStatus {
            source: -1,
            tag: -1,
            error: 0,
            count_bytes: 0,
            cancelled: true,
        };
        let untouched = vec![SENTINEL_BYTE; 64];
        checker
            .receive_completed(1, 0, 5, cancelled, &untouched)
            .unwrap();
        checker.receive_posted(1, PlannedPattern::ANY, 6);
        delivered(&mut checker, 2, 1, 7);
        sent(&mut checker);
        let error = checker.finish().unwrap_err();
        assert!(error.contains("posted-receive order broken"), "{error}");
    }

    #[test]
    fn a_message_delivered_twice_is_reported_at_the_second_delivery() {
        let mut checker = EngineChecker::new(&two_message_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 1);
        checker.receive_posted(1, PlannedPattern::ANY, 2);
        delivered(&mut checker, 0, 0, 3);
        let mut buffer = vec![SENTINEL_BYTE; 64];
        buffer[..16].copy_from_slice(&payload(3, 0, 16));
        let status = SeenStatus {
            source: 0,
            tag: 0,
            error: 0,
            count_bytes: 16,
            cancelled: false,
        };
        let error = checker
            .receive_completed(1, 1, 4, status, &buffer)
            .unwrap_err();
        assert!(error.contains("delivered twice"), "{error}");
    }

    #[test]
    fn a_message_neither_delivered_nor_cancelled_is_lost() {
        let mut checker = EngineChecker::new(&two_message_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 1);
        delivered(&mut checker, 0, 0, 2);
        sent(&mut checker);
        let error = checker.finish().unwrap_err();
        assert!(
            error.contains("message 1") && error.contains("lost"),
            "{error}"
        );
    }

    #[test]
    fn a_cancelled_receive_whose_buffer_was_written_is_reported() {
        let mut checker = EngineChecker::new(&two_message_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 1);
        let mut buffer = vec![SENTINEL_BYTE; 64];
        buffer[10] = 0;
        let status = SeenStatus {
            source: -1,
            tag: -1,
            error: 0,
            count_bytes: 0,
            cancelled: true,
        };
        let error = checker
            .receive_completed(1, 0, 2, status, &buffer)
            .unwrap_err();
        assert!(error.contains("buffer was written"), "{error}");
    }

    /// Three ranks: 0 -> 1 (message 0), 2 -> 1 (message 1), 1 -> 0
    /// (message 2), and one barrier; rank 0 dies.
    fn death_plan() -> Plan {
        let message = |source, destination| PlannedMessage {
            source,
            destination,
            index: 0,
            tag: 0,
            length_bytes: 16,
            mode: PlannedMode::Standard,
        };
        Plan {
            seed: 3,
            messages: vec![message(0, 1), message(2, 1), message(1, 0)],
            collectives: vec![PlannedCollective::Barrier],
            programs: vec![Vec::new(); 3],
        }
    }

    fn failed() -> SeenStatus {
        SeenStatus {
            source: -1,
            tag: -1,
            error: PROC_FAILED,
            count_bytes: 0,
            cancelled: false,
        }
    }

    fn from(source: u32) -> PlannedPattern {
        PlannedPattern {
            source: Some(source),
            tag: None,
        }
    }

    #[test]
    fn a_receive_naming_the_dead_rank_and_a_pending_wildcard_may_fail_at_the_notice() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.receive_posted(1, from(0), 1);
        checker.receive_posted(1, PlannedPattern::ANY, 2);
        checker.rank_died(0, 10);
        checker.notice_arrived(1, 5, &[]);
        let untouched = vec![SENTINEL_BYTE; 64];
        checker
            .receive_completed(1, 0, 5, failed(), &untouched)
            .unwrap();
        checker
            .receive_completed(1, 1, 5, failed(), &untouched)
            .unwrap();
        checker.check_notice_took_effect(1).unwrap();
    }

    #[test]
    fn a_failure_before_the_notice_or_on_a_live_source_is_reported() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.receive_posted(1, from(0), 1);
        checker.receive_posted(1, from(2), 2);
        let untouched = vec![SENTINEL_BYTE; 64];
        checker.rank_died(0, 10);
        let error = checker
            .receive_completed(1, 0, 3, failed(), &untouched)
            .unwrap_err();
        assert!(error.contains("not been told of any death"), "{error}");
        checker.notice_arrived(1, 5, &[]);
        let error = checker
            .receive_completed(1, 1, 5, failed(), &untouched)
            .unwrap_err();
        assert!(error.contains("names rank 2, which lives"), "{error}");
    }

    #[test]
    fn a_wildcard_receive_posted_after_the_notice_may_not_fail() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.rank_died(0, 10);
        checker.notice_arrived(1, 5, &[]);
        checker.receive_posted(1, PlannedPattern::ANY, 6);
        let untouched = vec![SENTINEL_BYTE; 64];
        let error = checker
            .receive_completed(1, 0, 6, failed(), &untouched)
            .unwrap_err();
        assert!(error.contains("only one pending at the notice"), "{error}");
    }

    #[test]
    fn a_pending_wildcard_receive_that_outlives_its_notice_is_reported() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 1);
        checker.rank_died(0, 10);
        checker.notice_arrived(1, 5, &[]);
        let error = checker.check_notice_took_effect(1).unwrap_err();
        assert!(
            error.contains("was pending when rank 1 was told"),
            "{error}"
        );
    }

    #[test]
    fn a_send_may_fail_only_toward_the_dead_rank_and_only_after_its_notice() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.rank_died(0, 10);
        let error = checker.send_completed(2, 3, failed()).unwrap_err();
        assert!(error.contains("before rank 1 was told"), "{error}");
        checker.notice_arrived(1, 5, &[]);
        checker.send_completed(2, 6, failed()).unwrap();
        checker.notice_arrived(2, 5, &[]);
        let error = checker.send_completed(1, 6, failed()).unwrap_err();
        assert!(error.contains("its destination lives"), "{error}");
    }

    #[test]
    fn a_message_from_the_dead_rank_that_arrived_after_the_notice_must_not_be_delivered() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.receive_posted(1, PlannedPattern::ANY, 7);
        checker.rank_died(0, 10);
        checker.notice_arrived(1, 5, &[0]);
        let mut buffer = vec![SENTINEL_BYTE; 64];
        buffer[..16].copy_from_slice(&payload(3, 0, 16));
        let status = SeenStatus {
            source: 0,
            tag: 0,
            error: 0,
            count_bytes: 16,
            cancelled: false,
        };
        let error = checker
            .receive_completed(1, 0, 8, status, &buffer)
            .unwrap_err();
        assert!(error.contains("delivered after rank 1 was told"), "{error}");
    }

    #[test]
    fn messages_of_the_dead_rank_may_be_lost_but_not_those_between_survivors() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.rank_died(0, 10);
        // Message 0 (from the dead) and message 2 (to it) never arrive.
        assert!(!checker.all_accounted());
        assert_eq!(checker.unclaimed(1), 1);
        let error = checker.finish().unwrap_err();
        assert!(
            error.contains("message 1") && error.contains("lost"),
            "{error}"
        );
    }

    #[test]
    fn a_barrier_the_dead_rank_never_entered_cannot_succeed_on_any_survivor() {
        let mut checker = EngineChecker::new(&death_plan());
        checker.rank_died(0, 10);
        checker.collective_started(0, 1, 11);
        checker.collective_started(0, 2, 12);
        let error = checker.collective_completed(0, 1, 20, 0, &[]).unwrap_err();
        assert!(error.contains("before ranks [0] entered it"), "{error}");
        // After the death, 101 is right even before this rank's own notice:
        // a partner's flagged data failed its collective.
        let mut checker = EngineChecker::new(&death_plan());
        checker.rank_died(0, 10);
        checker
            .collective_completed(0, 2, 21, PROC_FAILED, &[])
            .unwrap();
        // Before the death, it is not.
        let mut checker = EngineChecker::new(&death_plan());
        checker.rank_died(0, 30);
        let error = checker
            .collective_completed(0, 2, 21, PROC_FAILED, &[])
            .unwrap_err();
        assert!(error.contains("had not been told of any death"), "{error}");
    }
}
