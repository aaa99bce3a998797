print('the workload as it is now')
