"""The exploration engines: the local BFS (explore), the Spark engine (spark), the
liveness graph and lasso search (liveness), the bounded-deferral churn search
(churn), member-id renaming (renaming), random walks (walks) and the resource
guards they share (guards). Properties, refinement, proofs and simulation live
one level up, in checker/."""
