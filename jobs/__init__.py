"""Running the work: count of a file, stages, the compact pipeline, the summary stage's engines and breaker, batches on local workers or Dask."""
