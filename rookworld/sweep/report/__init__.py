"""What a sweep shows: its summary and plots, and the MLflow parent run its trials are filed under."""
