;;; emacs_next_edit_e2e.el --- M-x synconfroute-next-edit against the real server  -*- lexical-binding: t; -*-

;; Emacs in batch mode like a user: M-x eglot on a Python file, rename `total' to
;; `subtotal' on one line, M-x synconfroute-next-edit applies the server's next edit
;; (the same rename on the lines below).  What it saw goes to $SYNCONFROUTE_E2E_RESULT.

;;; Code:

(require 'json)
(require 'subr-x)
(add-to-list 'load-path (expand-file-name "editors/emacs" (getenv "SYNCONFROUTE_E2E_ROOT")))
(require 'synconfroute)

(setq synconfroute-command (json-parse-string (getenv "SYNCONFROUTE_E2E_CMD") :array-type 'list))
(synconfroute-setup)

(load (expand-file-name "e2e_lib.el" (file-name-directory load-file-name)) nil t)
(setq e2e-wait-seconds 20
      e2e-poll-seconds 0.05)

(condition-case err
    (progn
      (find-file (getenv "SYNCONFROUTE_E2E_FILE"))
      (call-interactively #'eglot)      ; M-x eglot
      (e2e-wait "the buffer to be managed" #'eglot-managed-p)
      (let ((server (eglot-current-server)))
        ;; The user's edit: "total" -> "subtotal" on line 2.
        (goto-char (point-min))
        (forward-line 1)
        (forward-char 4)
        (insert "sub")
        (setq e2e-step "synconfroute-next-edit")
        (e2e-put "applied" (or (call-interactively #'synconfroute-next-edit) "no"))
        (e2e-put "text" (buffer-substring-no-properties (point-min) (point-max)))
        (let ((status (e2e-wait "the accept to reach the server"
                                (lambda ()
                                  (let ((st (synconfroute-status)))
                                    (and (> (plist-get st :accepted) 0) st))))))
          (e2e-put "accepted" (plist-get status :accepted)))
        (setq e2e-step "shutdown")
        (eglot-shutdown server))
      (e2e-finish nil))
  (error (e2e-finish (error-message-string err))))
