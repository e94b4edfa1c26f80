;;; synconfroute-tests.el --- ERT tests of synconfroute.el  -*- lexical-binding: t; -*-

;; emacs --batch -L editors/emacs -l ert -l editors/emacs/synconfroute-tests.el \
;;       -f ert-run-tests-batch-and-exit

;;; Code:

(require 'ert)
(require 'json)
(require 'synconfroute)

(defmacro synconfroute-tests--with-programs (&rest body)
  "Run BODY with eglot's server table and hooks restored afterwards."
  `(let ((eglot-server-programs (copy-sequence eglot-server-programs))
         (eglot-managed-mode-hook eglot-managed-mode-hook))
     ,@body))

(ert-deftest synconfroute-setup-registers-the-modes ()
  (synconfroute-tests--with-programs
   (let ((synconfroute-command (list (executable-find "sh") "serve")))
     (synconfroute-setup)
     (dolist (case '((python-mode . "python") (java-mode . "java") (c++-mode . "cpp")
                     (c-mode . "c") (js-mode . "javascript") (typescript-mode . "typescript")
                     (go-mode . "go") (rust-mode . "rust") (python-ts-mode . "python")))
       (pcase-let ((`(,modes ,language-id ,contact) (eglot--lookup-mode (car case))))
         (should (eq (car modes) (car case)))
         (should (equal language-id (cdr case)))
         (should (eq contact #'synconfroute--contact))))
     (should (memq #'synconfroute--managed eglot-managed-mode-hook)))))

(ert-deftest synconfroute-setup-twice-keeps-one-entry ()
  (synconfroute-tests--with-programs
   (synconfroute-setup)
   (synconfroute-setup)
   (should (= 1 (cl-count #'synconfroute--contact eglot-server-programs :key #'cdr)))))

(ert-deftest synconfroute-contact-is-the-command-with-our-class ()
  (let ((synconfroute-command (list (executable-find "sh") "serve" "--flag")))
    (should (equal (synconfroute--contact)
                   (list 'synconfroute-server (executable-find "sh") "serve" "--flag")))))

(ert-deftest synconfroute-contact-explains-a-missing-program ()
  (let* ((synconfroute-command '("synconfroute-no-such-program" "serve"))
         (err (should-error (synconfroute--contact) :type 'user-error)))
    (should (string-match-p "not found on exec-path" (cadr err)))
    (should (string-match-p "synconfroute-command" (cadr err)))))

(ert-deftest synconfroute-contact-rejects-a-bad-command ()
  (let ((synconfroute-command "synconfroute serve"))
    (should-error (synconfroute--contact) :type 'user-error)))

(ert-deftest synconfroute-settings-become-initialization-options ()
  (let* ((synconfroute-settings '(:local (:backend "ollama")
                                  :privacy (:local_only t :never_send ["*.env"])
                                  :editor (:diagnostics :json-false)))
         (json (json-parse-string (jsonrpc--json-encode (synconfroute--initialization-options))
                                  :object-type 'alist :false-object nil)))
    (should (equal (alist-get 'backend (alist-get 'local json)) "ollama"))
    (should (eq (alist-get 'local_only (alist-get 'privacy json)) t))
    (should (equal (alist-get 'never_send (alist-get 'privacy json)) ["*.env"]))
    (should (assq 'diagnostics (alist-get 'editor json)))
    (should-not (alist-get 'diagnostics (alist-get 'editor json)))))

(ert-deftest synconfroute-no-settings-send-an-empty-object ()
  (let ((synconfroute-settings nil))
    (should (equal (jsonrpc--json-encode (synconfroute--initialization-options)) "{}"))))

(ert-deftest synconfroute-status-line ()
  (let ((status '(:local_only :json-false :local "ollama at http://127.0.0.1:11434"
                  :remote "http://gpu:8000/v1" :completions 3
                  :routes (:local 2 :remote 1 :none 0) :accepted 1
                  :last "synconfroute: remote (unconfident, confidence -1.20)")))
    (should (equal (synconfroute-format-status status)
                   (concat "synconfroute: local ollama at http://127.0.0.1:11434; "
                           "remote http://gpu:8000/v1; local-only off; 3 completions "
                           "(2 local, 1 remote, 0 none), 1 taken; "
                           "last: synconfroute: remote (unconfident, confidence -1.20)")))
    (should (string-match-p "local-only on; .* last: -$"
                            (synconfroute-format-status
                             '(:local_only t :local "embedded" :remote "not configured"
                               :completions 0 :routes (:local 0 :remote 0 :none 0)
                               :accepted 0 :last nil))))))

(ert-deftest synconfroute-commands-need-a-synconfroute-buffer ()
  (with-temp-buffer
    (let ((err (should-error (synconfroute-status) :type 'user-error)))
      (should (string-match-p "M-x eglot" (cadr err))))
    (should-error (synconfroute-toggle-local-only) :type 'user-error)))

(ert-deftest synconfroute-eldoc-shows-the-card-on-the-completed-lines ()
  (with-temp-buffer
    (insert "def add(a, b):\n    return a + b\n\nprint(add(1, 2))\n")
    (let ((synconfroute-last-route "synconfroute: local (confident-and-valid)")
          shown)
      (setq synconfroute--last
            (list (copy-marker 27) (copy-marker 32 t) "**synconfroute**: local"))
      (goto-char 20)
      (should (synconfroute-eldoc-function (lambda (doc &rest plist) (setq shown (cons doc plist)))))
      (should (equal shown '("**synconfroute**: local"
                             :echo "synconfroute: local (confident-and-valid)")))
      (goto-char (point-max))
      (setq shown nil)
      (should-not (synconfroute-eldoc-function (lambda (&rest args) (setq shown args))))
      (should-not shown))))

(provide 'synconfroute-tests)
;;; synconfroute-tests.el ends here
