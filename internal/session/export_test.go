package session

// ObserveEdges has r tell f every transition it makes, as the edge of the
// machine it took: the runner tests collect them to show that every edge
// of the table is driven by some test.
func ObserveEdges(r *Runner, f func(Edge)) { r.observe = f }
