"""The World's pure rules: start budgets and progress, rank states, deaths."""
