# Capture: only the built-in demo is captured by the workflow. A user's incident is
# recorded by their workload (FlightRecorder), `stallcase record` or `stallcase import`.


rule capture_demo:
    output:
        f"{INCIDENTS}/demo/manifest.json",
    params:
        args=config.get("demo", {}).get("args", []),
    log:
        layout.incident_log(RESULTS, "demo", "capture.log"),
    run:
        rulelog.logged(log[0], workflow_lib.capture.demo.capture, INCIDENTS, params.args, log_path=log[0])
