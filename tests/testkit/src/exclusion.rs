//! Mutual exclusion, the rule itself: no two holders of one lock name
//! believed it valid at the same instant. One owner for the simulator's
//! check (`core/tests/sim/world.rs`, belief windows in simulated time) and
//! the real-server safety checker's property (b) (`tests/safety`, believed
//! validity from the workers' histories).

/// Sweeps `windows` — `(start, end, holder)`, half-open `[start, end)` —
/// in order of `start` (a stable sort: windows that start together keep
/// the order they came in) and returns each overlap as
/// `(earlier, later)`: indices into the sorted `windows`, where `earlier`
/// is the window reaching furthest among those before `later` and belongs
/// to another holder. Windows of one holder may touch or overlap each
/// other (a renewal moves the end).
pub fn overlaps<T: Ord + Copy, H: PartialEq>(windows: &mut [(T, T, H)]) -> Vec<(usize, usize)> {
    windows.sort_by_key(|w| w.0);
    let mut found = Vec::new();
    // The window that reaches furthest so far.
    let mut latest: Option<usize> = None;
    for i in 0..windows.len() {
        if let Some(p) = latest {
            if windows[p].2 != windows[i].2 && windows[i].0 < windows[p].1 {
                found.push((p, i));
            }
        }
        if latest.is_none_or(|p| windows[i].1 > windows[p].1) {
            latest = Some(i);
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::overlaps;

    #[test]
    fn back_to_back_holders_do_not_overlap() {
        let mut w = [(10, 20, 'b'), (0, 10, 'a'), (20, 30, 'a')];
        assert!(overlaps(&mut w).is_empty());
    }

    #[test]
    fn a_holder_inside_anothers_window_is_found() {
        let mut w = [(0, 100, 'a'), (5, 10, 'b'), (50, 60, 'c')];
        assert_eq!(overlaps(&mut w), [(0, 1), (0, 2)]);
    }

    #[test]
    fn one_holders_own_windows_may_overlap() {
        let mut w = [(0, 10, 'a'), (5, 20, 'a'), (20, 25, 'b')];
        assert!(overlaps(&mut w).is_empty());
    }
}
