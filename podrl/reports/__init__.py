"""Reports from runs: `podrl reproduce` (a preset over seeds into a report: reproduce, report), `podrl plot`,
`podrl aggregate` (IQM and optimality gap), `podrl population-summary` and `podrl profile-summary`."""
