// Tools are added one file each.
