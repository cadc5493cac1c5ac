//! A VC's traffic contract as the generic cell rate algorithm (GCRA, ATM Forum TM 4.0 4.4.3,
//! the virtual scheduling form), used to shape: a cell leaves only once it would conform.
//!
//! CBR is one GCRA at the peak cell rate; VBR adds a second at the sustainable rate whose
//! tolerance lets `mbs` cells leave back to back at the peak rate. Times are picoseconds, so a
//! cell interval at OC-12's 1.41 M cells/s (708 ns) keeps its fraction.

use super::TrafficClass;

const PS_PER_S: u64 = 1_000_000_000_000;

/// One GCRA(T, tau): emission interval and tolerance, and the theoretical arrival time.
#[derive(Clone, Copy, Debug)]
struct Gcra {
    t: u64,
    tau: u64,
    tat: u64,
}

impl Gcra {
    fn new(rate: u32, tau: u64) -> Self {
        Gcra {
            t: PS_PER_S / u64::from(rate.max(1)),
            tau,
            tat: 0,
        }
    }

    fn eligible(&self) -> u64 {
        self.tat.saturating_sub(self.tau)
    }

    fn sent(&mut self, now: u64) {
        self.tat = self.tat.max(now) + self.t;
    }
}

/// A shaped VC's contract.
#[derive(Clone, Copy, Debug)]
pub struct Contract {
    peak: Gcra,
    sustained: Option<Gcra>,
}

impl Contract {
    /// The contract of `class` (None for UBR: nothing to shape). `cdvt_ps` is the cell delay
    /// variation tolerated at the peak rate: how late the scheduler may serve the VC and still
    /// catch up, so it must be at least the scheduler's period for the peak rate to be kept.
    pub fn new(class: TrafficClass, cdvt_ps: u64) -> Option<Contract> {
        match class {
            TrafficClass::Ubr => None,
            TrafficClass::Cbr { pcr } => Some(Contract {
                peak: Gcra::new(pcr, cdvt_ps),
                sustained: None,
            }),
            TrafficClass::Vbr { pcr, scr, mbs } => {
                let peak = Gcra::new(pcr, cdvt_ps);
                let ts = PS_PER_S / u64::from(scr.max(1));
                // Burst tolerance: MBS cells at the peak rate conform (TM 4.0 4.4.3).
                let bt = u64::from(mbs.max(1) - 1) * ts.saturating_sub(peak.t);
                Some(Contract {
                    peak,
                    sustained: Some(Gcra::new(scr, bt + cdvt_ps)),
                })
            }
        }
    }

    /// The earliest time (ps) the next cell conforms.
    #[inline]
    pub fn eligible(&self) -> u64 {
        let p = self.peak.eligible();
        self.sustained.map_or(p, |s| p.max(s.eligible()))
    }

    /// Accounts a cell sent at `now` (ps, at or after [`Contract::eligible`]).
    #[inline]
    pub fn sent(&mut self, now: u64) {
        self.peak.sent(now);
        if let Some(s) = self.sustained.as_mut() {
            s.sent(now);
        }
    }

    /// Starts the contract afresh at `now` for a VC that was idle (no credit saved beyond the
    /// tolerances).
    pub fn idle_until(&mut self, now: u64) {
        self.peak.tat = self.peak.tat.max(now);
        if let Some(s) = self.sustained.as_mut() {
            // A sustained-rate bucket that drained while idle starts full of credit, as GCRA
            // does: TAT no earlier than now.
            s.tat = s.tat.max(now);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Cells a backlogged VC sends when served every `period` ps for `span` ps.
    fn run(c: &mut Contract, period: u64, span: u64) -> Vec<u64> {
        let mut sent = Vec::new();
        let mut now = 0;
        while now < span {
            while c.eligible() <= now {
                c.sent(now);
                sent.push(now);
            }
            now += period;
        }
        sent
    }

    #[test]
    fn cbr_keeps_its_peak_rate_when_served_coarsely() {
        // 100,000 cells/s, served every 37 us with a 100 us tolerance: 1 s gives 100,000
        // cells, give or take the tolerance's worth.
        let mut c = Contract::new(TrafficClass::Cbr { pcr: 100_000 }, 100_000_000).unwrap();
        let sent = run(&mut c, 37_000_000, PS_PER_S);
        assert!((99_990..=100_011).contains(&sent.len()), "{}", sent.len());
    }

    #[test]
    fn vbr_bursts_mbs_cells_at_peak_then_holds_the_sustained_rate() {
        // PCR 100k, SCR 10k, MBS 50; served every microsecond, no extra tolerance.
        let mut c = Contract::new(
            TrafficClass::Vbr {
                pcr: 100_000,
                scr: 10_000,
                mbs: 50,
            },
            0,
        )
        .unwrap();
        let sent = run(&mut c, 1_000_000, PS_PER_S);
        // The first 50 cells 10 us apart, then 100 us apart.
        for w in sent[..50].windows(2) {
            assert_eq!(w[1] - w[0], 10_000_000);
        }
        assert!(sent[51] - sent[50] >= 99_000_000, "{}", sent[51] - sent[50]);
        // Over a second: 10,000 cells plus the burst's credit.
        assert!((10_000..=10_050).contains(&sent.len()), "{}", sent.len());
    }

    #[test]
    fn ubr_is_not_shaped() {
        assert!(Contract::new(TrafficClass::Ubr, 0).is_none());
    }
}
